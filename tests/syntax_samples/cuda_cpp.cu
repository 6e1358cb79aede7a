// a kernel (
__global__ void add(const float *a, float *b) {
    const char *s = "a \"quoted\" (";
    b[threadIdx.x] += a[threadIdx.x]; /* trailing [ */
}
