//! The one font of hinoki's pictures: DejaVu Sans, embedded in the binary (licence in
//! `assets/DejaVuSans-LICENSE.txt`), so that text renders the same on every machine and no
//! system font is needed.

use plotters::style::{FontStyle, IntoFont, TextStyle};
use std::sync::Once;

/// The family name under which the embedded font is registered with plotters.
const FAMILY: &str = "sans-serif";

/// DejaVu Sans (Bitstream Vera licence, with public-domain DejaVu changes).
static DEJAVU_SANS: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// A text style of the embedded font at `size` pixels; registers the font on first use.
pub(crate) fn text(size: f64) -> TextStyle<'static> {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        if plotters::style::register_font(FAMILY, FontStyle::Normal, DEJAVU_SANS).is_err() {
            // The bytes are compiled in and parse: this cannot fail short of a corrupt build.
            unreachable!("the embedded DejaVu Sans does not parse");
        }
    });
    (FAMILY, size).into_font().into()
}

/// Draws the legend of `chart`'s labelled series in its upper right corner, in the embedded
/// font at 0.9 × `font` pixels, on a translucent white box with a black border.
pub(crate) fn draw_legend<'a, DB, CT>(
    chart: &mut plotters::chart::ChartContext<'a, DB, CT>,
    font: f64,
) -> Result<(), plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: plotters::prelude::DrawingBackend + 'a,
    CT: plotters::coord::CoordTranslate,
{
    use plotters::prelude::{Color, SeriesLabelPosition, BLACK, WHITE};
    chart
        .configure_series_labels()
        .label_font(text(font * 0.9))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
}
