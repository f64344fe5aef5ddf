//! The Rust twins of the kernels' argument blocks: every `struct RUST_TWIN Name { ... };` of
//! `cuda/*.cu` and `cuda/*.cuh` becomes a `#[repr(C)]` struct of the same name, fields and order
//! in `$OUT_DIR/kernel_args.rs` (included by `src/gpu/args.rs`), so that the C declaration is
//! the one definition of what a launch passes: a launch builds its block by field names, and a
//! field added, removed or renamed on one side does not compile on the other.
//!
//! A kernel may instead take the fields of a twin as separate parameters, in order, nested twins
//! flattened (`tree.first` as `tree_first`): the walks, scans, radix passes and `store_cells` do,
//! because NVVM honours `__restrict__` only on kernel parameters (read-only loads through the
//! non-coherent cache and fewer registers). Such a parameter list is a macro, `#define NAME` with continued lines and
//! `/* */` comments, right after a comment that says "parameters are the fields of Name"; it
//! is checked here against the twin's fields (names, C types and byte offsets), so it cannot
//! drift from the struct the launch fills, and the struct may have no tail padding (a launch
//! passes all of its bytes as the parameters). A kernel that hands such parameters on to a
//! device function does so with a macro of their names after a comment that says "arguments
//! are the fields of Name" (on one line), checked here as well.
//!
//! The grammar read is small on purpose: the struct line, then one field per line
//! (`type name;`, with `const` and `__restrict__` allowed and ignored), each with a `//` comment
//! on the lines above it or after it (it becomes the field's doc), then `};`. Pointers become
//! `u64` device addresses; `int`, `unsigned`, `unsigned long long` (or `u64`), `long long`,
//! `float` and `double` their Rust types; the name of another twin, that twin.

use std::fmt::Write as _;
use std::path::Path;

/// One field of a twin.
#[derive(Debug)]
struct Field {
    name: String,
    /// The Rust type.
    rust: String,
    /// The C type as written, `const` and `__restrict__` left out.
    c: String,
    /// True when the type is a twin's name (a struct nested by value).
    nested: bool,
    doc: Vec<String>,
}

/// One `struct RUST_TWIN`.
#[derive(Debug)]
struct Twin {
    name: String,
    source: String,
    doc: Vec<String>,
    fields: Vec<Field>,
}

/// The Rust source of the twins of every `struct RUST_TWIN` in the `.cu` and `.cuh` files of
/// `dir` (in file-name order), or the first error, naming the file and line.
pub fn generate(dir: &Path) -> Result<String, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cu" || x == "cuh"))
        .collect();
    files.sort();
    let mut twins: Vec<Twin> = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let name = format!("cuda/{}", file.file_name().unwrap().to_string_lossy());
        twins.extend(parse(&text, &name)?);
    }
    // A field of a struct type must name a twin (of any file).
    for t in &twins {
        for f in &t.fields {
            if f.nested && !twins.iter().any(|u| u.name == f.c) {
                return Err(format!(
                    "{}: struct {}, field `{}`: type `{}` has no Rust twin",
                    t.source, t.name, f.name, f.c
                ));
            }
        }
    }
    for file in &files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let name = format!("cuda/{}", file.file_name().unwrap().to_string_lossy());
        check_flat_kernels(&text, &name, &twins)?;
        check_forwarded_arguments(&text, &name, &twins)?;
    }
    let mut names: Vec<&str> = twins.iter().map(|t| t.name.as_str()).collect();
    names.sort();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("struct RUST_TWIN {} is declared twice", w[0]));
    }
    Ok(render(&twins))
}

/// The twins declared in `text` (file `source`).
fn parse(text: &str, source: &str) -> Result<Vec<Twin>, String> {
    let mut twins: Vec<Twin> = Vec::new();
    let mut comment: Vec<String> = Vec::new();
    let mut open: Option<Twin> = None;
    for (k, raw) in text.lines().enumerate() {
        let at = || format!("{source}:{}", k + 1);
        let line = raw.trim();
        if let Some(c) = line.strip_prefix("//") {
            comment.push(c.trim().to_string());
            continue;
        }
        match open.as_mut() {
            None => {
                if let Some(rest) = line.strip_prefix("struct RUST_TWIN ") {
                    let name = rest.trim_end_matches('{').trim();
                    if !rest.trim_end().ends_with('{') || !is_ident(name) {
                        return Err(format!("{}: expected `struct RUST_TWIN Name {{`", at()));
                    }
                    open = Some(Twin {
                        name: name.to_string(),
                        source: source.to_string(),
                        doc: std::mem::take(&mut comment),
                        fields: Vec::new(),
                    });
                }
                comment.clear();
            }
            Some(twin) => {
                if line.starts_with("};") {
                    if twin.fields.is_empty() {
                        return Err(format!("{}: struct {} has no field", at(), twin.name));
                    }
                    twins.push(open.take().expect("open"));
                    comment.clear();
                    continue;
                }
                if line.is_empty() {
                    continue;
                }
                let (decl, trailing) = match line.split_once("//") {
                    Some((d, c)) => (d.trim(), Some(c.trim().to_string())),
                    None => (line, None),
                };
                let mut doc = std::mem::take(&mut comment);
                doc.extend(trailing);
                let field = field(decl, doc).map_err(|e| format!("{}: {e}", at()))?;
                twin.fields.push(field);
            }
        }
    }
    match open {
        Some(t) => Err(format!(
            "{source}: struct RUST_TWIN {} is not closed by `}};`",
            t.name
        )),
        None => Ok(twins),
    }
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The field declared by `decl` (`type name;`), documented by `doc`; a type that is no C
/// scalar nor pointer is taken as a twin's name (checked once every file is read).
fn field(decl: &str, doc: Vec<String>) -> Result<Field, String> {
    let decl = decl
        .strip_suffix(';')
        .ok_or_else(|| format!("expected one field `type name;`, found `{decl}`"))?;
    if decl.contains(',') || decl.contains('[') || decl.contains('(') {
        return Err(format!("one field per line, no arrays: `{decl}`"));
    }
    let spaced = decl.replace('*', " * ");
    let words: Vec<&str> = spaced
        .split_whitespace()
        .filter(|w| *w != "const" && *w != "__restrict__")
        .collect();
    let (name, ty) = words
        .split_last()
        .ok_or_else(|| format!("expected `type name;`, found `{decl}`"))?;
    if !is_ident(name) || ty.is_empty() {
        return Err(format!("expected `type name;`, found `{decl}`"));
    }
    if doc.is_empty() {
        return Err(format!(
            "field `{name}` has no `//` comment (it becomes its doc)"
        ));
    }
    let c = ty.join(" ").replace(" *", "*");
    let rust = if ty.contains(&"*") {
        "u64".to_string()
    } else {
        match c.as_str() {
            "int" => "i32".into(),
            "unsigned" | "unsigned int" => "u32".into(),
            "unsigned long long" | "u64" => "u64".into(),
            "long long" => "i64".into(),
            "float" => "f32".into(),
            "double" => "f64".into(),
            other if is_ident(other) => {
                return Ok(Field {
                    name: name.to_string(),
                    rust: other.to_string(),
                    c,
                    nested: true,
                    doc,
                })
            }
            other => return Err(format!("field `{name}`: type `{other}` has no Rust twin")),
        }
    };
    Ok(Field {
        name: name.to_string(),
        rust,
        c,
        nested: false,
        doc,
    })
}

/// A kernel's comments as doc lines: plain text, whose brackets (`[0] the next group`) are no
/// links to rustdoc.
fn doc_lines(out: &mut String, indent: &str, doc: &[String]) {
    for line in doc {
        let text = line.replace('[', "\\[").replace(']', "\\]");
        let _ = writeln!(out, "{indent}#[doc = {:?}]", format!(" {text}"));
    }
}

/// The Rust source of `twins`.
fn render(twins: &[Twin]) -> String {
    let mut out =
        String::from("// Generated by build.rs (build/twins.rs) from cuda/: do not edit.\n\n");
    for t in twins {
        doc_lines(&mut out, "", &t.doc);
        let _ = writeln!(out, "#[doc = \"\"]");
        let _ = writeln!(
            out,
            "#[doc = \" The twin of `struct {}` in `{}`.\"]",
            t.name, t.source
        );
        let _ = writeln!(
            out,
            "#[repr(C)]\n#[derive(Clone, Copy, Debug, Default, PartialEq)]"
        );
        let _ = writeln!(out, "pub struct {} {{", t.name);
        for f in &t.fields {
            doc_lines(&mut out, "    ", &f.doc);
            if f.rust == "u64" && f.c.ends_with('*') {
                let _ = writeln!(out, "    #[doc = \" (device address, `{}`)\"]", f.c);
            }
            let _ = writeln!(out, "    pub {}: {},", f.name, f.rust);
        }
        let _ = writeln!(out, "}}\n");
        let _ = writeln!(
            out,
            "// SAFETY: #[repr(C)] with the C struct's field types in its order, so the bytes are\n\
             // those the kernel reads (x86-64 and NVPTX lay C structs out alike).\n\
             unsafe impl cudarc::driver::DeviceRepr for {} {{}}\n",
            t.name
        );
        let _ = writeln!(out, "impl KernelArgs for {} {{}}\n", t.name);
    }
    out
}

/// The marker of a kernel whose parameters are a twin's fields.
const FLAT_MARKER: &str = "parameters are the fields of ";

/// Size and alignment in bytes of the C type `c` (a twin's field type), or of twin `c`.
fn layout_of(c: &str, twins: &[Twin]) -> (usize, usize) {
    if c.ends_with('*') {
        return (8, 8);
    }
    match c {
        "int" | "unsigned" | "unsigned int" | "float" => (4, 4),
        "unsigned long long" | "u64" | "long long" | "double" => (8, 8),
        other => {
            let t = twins.iter().find(|t| t.name == other).expect("a twin");
            let (mut size, mut align) = (0usize, 1usize);
            for f in &t.fields {
                let (s, a) = layout_of(&f.c, twins);
                size = size.next_multiple_of(a) + s;
                align = align.max(a);
            }
            (size.next_multiple_of(align), align)
        }
    }
}

/// The leaves of twin `name` flattened: (parameter name, C type, byte offset in the struct).
fn leaves(
    name: &str,
    prefix: &str,
    base: usize,
    twins: &[Twin],
    out: &mut Vec<(String, String, usize)>,
) {
    let t = twins.iter().find(|t| t.name == name).expect("a twin");
    let mut at = 0usize;
    for f in &t.fields {
        let (s, a) = layout_of(&f.c, twins);
        at = at.next_multiple_of(a);
        if twins.iter().any(|t| t.name == f.c) {
            leaves(&f.c, &format!("{prefix}{}_", f.name), base + at, twins, out);
        } else {
            out.push((format!("{prefix}{}", f.name), f.c.clone(), base + at));
        }
        at += s;
    }
}

/// The first macro of `after` (`#define NAME` and its continued lines), which follows a marker
/// naming twin `name` in file `source`: its name, its body without `/* */` comments, and where
/// its `#define` is in `after`.
fn macro_after(after: &str, source: &str, name: &str) -> Result<(String, String, usize), String> {
    let define = after
        .find("#define ")
        .ok_or_else(|| format!("{source}: no #define after the fields of {name}"))?;
    let mut lines = after[define + "#define ".len()..].lines();
    let first = lines.next().unwrap_or("");
    let mname = first.split_whitespace().next().unwrap_or("").to_string();
    let mut body = vec![first.trim_end().trim_end_matches('\\')[mname.len()..].to_string()];
    let mut continued = first.trim_end().ends_with('\\');
    for line in lines {
        if !continued {
            break;
        }
        continued = line.trim_end().ends_with('\\');
        body.push(line.trim_end().trim_end_matches('\\').to_string());
    }
    let mut list = String::new();
    for piece in body.join(" ").split("/*") {
        list.push_str(piece.split_once("*/").map_or(piece, |(_, after)| after));
    }
    Ok((mname, list, define))
}

/// The marker of a macro that passes a twin's fields on as arguments, by name.
const ARGUMENTS_MARKER: &str = "arguments are the fields of ";

/// Checks every macro of `text` (file `source`) marked as passing a twin's fields on (a
/// kernel that hands its parameters to a device function): its names must be the twin's
/// leaves, in order.
fn check_forwarded_arguments(text: &str, source: &str, twins: &[Twin]) -> Result<(), String> {
    let check = |name: &str, mname: &str, list: &str| {
        let names: Vec<&str> = list.split(',').map(str::trim).collect();
        let mut want = Vec::new();
        leaves(name, "", 0, twins, &mut want);
        let want: Vec<&str> = want.iter().map(|(n, _, _)| n.as_str()).collect();
        if names != want {
            let k = names.iter().zip(&want).take_while(|(a, b)| a == b).count();
            return Err(format!(
                "{source}: {mname} passes `{}` as argument {k}; the fields of {name} give `{}`",
                names.get(k).unwrap_or(&"nothing"),
                want.get(k).unwrap_or(&"nothing")
            ));
        }
        Ok(())
    };
    each_marked_macro(
        text,
        source,
        ARGUMENTS_MARKER,
        "a macro passes on",
        twins,
        check,
    )
}

/// Calls `check(twin, macro, body)` for every macro of `text` (file `source`) that follows a
/// `marker` naming a twin, with the twin's name, the macro's and its body (without `/* */`
/// comments); a marker naming no twin is an error that says what such a macro does with the
/// twin's fields (`does`).
fn each_marked_macro(
    text: &str,
    source: &str,
    marker: &str,
    does: &str,
    twins: &[Twin],
    check: impl Fn(&str, &str, &str) -> Result<(), String>,
) -> Result<(), String> {
    let mut rest = text;
    while let Some(at) = rest.find(marker) {
        let after = &rest[at + marker.len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !twins.iter().any(|t| t.name == name) {
            return Err(format!(
                "{source}: {does} the fields of {name}, which is no twin"
            ));
        }
        let (mname, list, define) = macro_after(after, source, &name)?;
        check(&name, &mname, &list)?;
        rest = &after[define + 1..];
    }
    Ok(())
}

/// Checks every kernel of `text` (file `source`) marked as taking a twin's fields: its
/// parameters must be the twin's leaves, by name and C type, at the offsets the struct gives
/// them (each parameter aligned to its own type, as kernel parameters are).
fn check_flat_kernels(text: &str, source: &str, twins: &[Twin]) -> Result<(), String> {
    let check = |name: &str, kname: &str, list: &str| {
        let params: Vec<(String, String)> = list
            .split(',')
            .map(|p| {
                let spaced = p.replace('*', " * ");
                let words: Vec<&str> = spaced
                    .split_whitespace()
                    .filter(|w| *w != "const" && *w != "__restrict__")
                    .collect();
                let (n, ty) = words.split_last().unwrap_or((&"", &[]));
                (n.to_string(), ty.join(" ").replace(" *", "*"))
            })
            .collect();
        let mut want = Vec::new();
        leaves(name, "", 0, twins, &mut want);
        let mut at = 0usize;
        for (k, (n, c)) in params.iter().enumerate() {
            let Some((wn, wc, woff)) = want.get(k) else {
                return Err(format!(
                    "{source}: {kname} has more parameters than {name} has fields"
                ));
            };
            if n != wn || c != wc {
                return Err(format!(
                "{source}: {kname}, parameter {k} is `{c} {n}`; the fields of {name} give `{wc} {wn}`"
            ));
            }
            let (s, a) = layout_of(c, twins);
            at = at.next_multiple_of(a);
            if at != *woff {
                return Err(format!(
                "{source}: {kname}, parameter {k} is `{c} {n}` at byte {at}; the fields of {name} give `{wc} {wn}` at byte {woff}"
            ));
            }
            at += s;
        }
        if params.len() != want.len() {
            return Err(format!(
                "{source}: {kname} lacks fields of {name} (it has {} of {})",
                params.len(),
                want.len()
            ));
        }
        let (size, _) = layout_of(name, twins);
        if at != size {
            return Err(format!(
            "{source}: {kname} takes the fields of {name}, which end at byte {at} of its {size}: reorder them so that the struct has no tail padding (the launch passes all its bytes as the kernel's parameters)"
        ));
        }
        Ok(())
    };
    each_marked_macro(text, source, FLAT_MARKER, "a kernel takes", twins, check)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The twins of `text` (one file), checked as `generate` checks them.
    fn twins_of(text: &str) -> Result<Vec<Twin>, String> {
        let twins = parse(text, "t.cu")?;
        check_flat_kernels(text, "t.cu", &twins)?;
        Ok(twins)
    }

    #[test]
    fn the_kernels_sources_give_their_twins() {
        let code = generate(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda"))
            .expect("cuda/ declares valid blocks");
        for name in [
            "TreeArrays",
            "FrameMap",
            "WalkArgs",
            "ScanArgs",
            "ParticleSet",
        ] {
            assert!(code.contains(&format!("pub struct {name} {{")), "{name}");
        }
        assert!(code.contains("    pub tree: TreeArrays,"));
        // Brackets in a comment stay text, not rustdoc links.
        assert!(code.contains(r#"walk_list: \\[0\\] the next group to take"#));
    }

    #[test]
    fn fields_map_to_rust_types_and_carry_their_comments() {
        let t = twins_of(
            "// A block.\nstruct RUST_TWIN B {\n    // Count.\n    int n;\n    \
             const float4 *__restrict__ p; // Points.\n    // Wide.\n    unsigned long long w;\n};\n",
        )
        .unwrap();
        let f: Vec<_> = t[0]
            .fields
            .iter()
            .map(|f| (&*f.name, &*f.rust, &*f.c))
            .collect();
        assert_eq!(
            f,
            [
                ("n", "i32", "int"),
                ("p", "u64", "float4*"),
                ("w", "u64", "unsigned long long")
            ]
        );
        assert_eq!(t[0].fields[1].doc, ["Points."]);
        assert_eq!(layout_of("B", &t), (24, 8));
    }

    #[test]
    fn malformed_blocks_are_errors_naming_the_line() {
        let missing = twins_of("struct RUST_TWIN B {\n    int n;\n};\n").unwrap_err();
        assert!(
            missing.contains("t.cu:2: field `n` has no `//` comment"),
            "{missing}"
        );
        let two = twins_of("struct RUST_TWIN B {\n    int a, b; // Two.\n};\n").unwrap_err();
        assert!(two.contains("one field per line"), "{two}");
        let open = twins_of("struct RUST_TWIN B {\n    int n; // N.\n").unwrap_err();
        assert!(open.contains("is not closed"), "{open}");
        let nested = parse("struct RUST_TWIN B {\n    Other o; // O.\n};\n", "t.cu").unwrap();
        assert!(nested[0].fields[0].nested);
    }

    /// Twin B = {int n; int m; P p} with P = {float *q; int a; int b}, and a parameter macro
    /// for it.
    fn flat(params: &str) -> String {
        format!(
            "struct RUST_TWIN P {{\n    // Q.\n    float *q;\n    // A.\n    int a;\n    // B.\n    int b;\n}};\n\
             struct RUST_TWIN B {{\n    // N.\n    int n;\n    // M.\n    int m;\n    // P.\n    P p;\n}};\n\
             // Its parameters are the fields of B.\n#define B_PARAMETERS \\\n{params}\n"
        )
    }

    #[test]
    fn argument_macros_must_name_their_structs_fields() {
        let twins = |args: &str| {
            let text = format!(
                "struct RUST_TWIN P {{\n    // Q.\n    float *q;\n    // A.\n    int a;\n}};\n\
                 struct RUST_TWIN B {{\n    // N.\n    int n;\n    // P.\n    P p;\n}};\n\
                 // The arguments are the fields of B.\n#define B_ARGUMENTS \\\n{args}\n"
            );
            let t = parse(&text, "t.cu")?;
            check_forwarded_arguments(&text, "t.cu", &t)
        };
        assert!(twins("    n, /* N */ p_q, \\\n    p_a").is_ok());
        let swapped = twins("    n, p_a, p_q").unwrap_err();
        assert!(swapped.contains("passes `p_a` as argument 1"), "{swapped}");
        let short = twins("    n, p_q").unwrap_err();
        assert!(short.contains("passes `nothing` as argument 2"), "{short}");
    }

    #[test]
    fn parameter_macros_must_be_their_structs_fields() {
        let good = "    int n, int m, /* M */ \\\n    float *__restrict__ p_q, int p_a, int p_b";
        assert!(twins_of(&flat(good)).is_ok());
        let swapped =
            twins_of(&flat("    int m, int n, float *p_q, int p_a, int p_b")).unwrap_err();
        assert!(swapped.contains("parameter 0 is `int m`"), "{swapped}");
        let short = twins_of(&flat("    int n, int m, float *p_q, int p_a")).unwrap_err();
        assert!(short.contains("lacks fields of B"), "{short}");
        // A nested struct aligned past where its first field would go as a parameter.
        let gap = "struct RUST_TWIN P {\n    // A.\n    int a;\n    // Q.\n    float *q;\n};\n\
                   struct RUST_TWIN G {\n    // N.\n    int n;\n    // P.\n    P p;\n};\n\
                   // Its parameters are the fields of G.\n#define G_PARAMETERS int n, int p_a, float *p_q\n";
        let gap = twins_of(gap).unwrap_err();
        assert!(gap.contains("parameter 1 is `int p_a` at byte 4"), "{gap}");
        let tail = "struct RUST_TWIN T {\n    // P.\n    float *p;\n    // N.\n    int n;\n};\n\
                    // Its parameters are the fields of T.\n#define T_PARAMETERS float *p, int n\n";
        let padded = twins_of(tail).unwrap_err();
        assert!(padded.contains("no tail padding"), "{padded}");
    }
}
