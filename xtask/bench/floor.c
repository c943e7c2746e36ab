/* The floor of a whole-process row: a static C program that does nothing. `cargo xtask
 * bench-vs-upstream` times it with `driver time` beside check-fabric. */
int main(void) { return 0; }
