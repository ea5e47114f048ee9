/* Linked into the probe tests' helper programs in an AddressSanitizer build
 * (tests/probes/CMakeLists.txt): no leak check at their exit.
 *
 * LeakSanitizer checks at exit from a tracer it clones without CLONE_THREAD, so the
 * tracer is a process of its own, a child of the helper, and tailtrace, which traces the
 * target's process tree, rightly records it. The tests count the processes, threads and
 * off-CPU time of helpers whose behaviour they know by construction; a process no helper
 * starts would make those oracles wrong. The helpers are test fixtures: what the
 * sanitizer pass checks for leaks is our own programs (tailtrace, orders-server, httpload). */
int __lsan_is_turned_off(void);

int __lsan_is_turned_off(void)
{
	return 1;
}
