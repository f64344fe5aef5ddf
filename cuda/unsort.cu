// Results of a walk back in the particles' input order: target k of the walk order is input
// particle order[k]. Its (ax, ay, az, phi) and its (p2p, m2p) counts move there, so that the
// host receives them in input order and only converts them (src/forces/tree_forces.rs).

extern "C" __global__ void __launch_bounds__(256)
unsort_results(const float4 *__restrict__ walk_out, const uint2 *__restrict__ walk_counts,
               const unsigned *__restrict__ order, int n, float4 *__restrict__ out,
               uint2 *__restrict__ counts)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        const unsigned i = order[k];
        out[i] = walk_out[k];
        counts[i] = walk_counts[k];
    }
}
