// SPDX-License-Identifier: MIT
/*
 * Ground truth for demangled frames and spans named as people read them.
 *   demangle_target run N   N rounds; in each, six functions sleep 2 ms apiece:
 *     tt::Worker::serve(long)      C++ (_ZN2tt6Worker5serveEl)
 *     tt::overloaded(int), tt::overloaded(double)   two C++ overloads
 *     ttcrate::worker::serve       a legacy Rust name (_ZN...17h<hash>E)
 *     ttcrate::worker::poll        a Rust v0 name (_RNv...)
 *     (anonymous namespace)::Probe::peek(long) const   parentheses and a qualifier
 *                                  around the name
 *   The Rust names are symbols given by hand (asm labels): what rustc emits,
 *   without needing rustc. Each sleeps through nap(), so that the frame-pointer
 *   walk from inside libc (which keeps none) still finds the named function.
 *   overloaded(int), rust_legacy and rust_v0 have frames of one size: they block
 *   with the same user IP, SP and frame pointer, told apart only by the return
 *   address above nap's frame (the off-CPU stack cache, docs/probes/sched.md).
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

extern "C" __attribute__((noinline)) void nap(long i)
{
	struct timespec ts = { 0, 2000000 };

	nanosleep(&ts, nullptr);
	asm volatile("" ::"r"(i) : "memory");
}

/* nap(i) from a frame of N longs: each named function's own size */
#define NAP_IN_FRAME(n, i)                          \
	do {                                        \
		volatile long frame_[n] = { (long)(i) }; \
		nap(frame_[0]);                     \
	} while (0)

namespace tt {
struct Worker {
	__attribute__((noinline)) long serve(long i)
	{
		NAP_IN_FRAME(2, i);
		return 2 * i + 1;
	}
};

__attribute__((noinline)) long overloaded(int i)
{
	NAP_IN_FRAME(4, i);
	return i;
}

__attribute__((noinline)) long overloaded(double d)
{
	NAP_IN_FRAME(6, d);
	return (long)d;
}
} // namespace tt

namespace {
struct Probe {
	__attribute__((noinline)) long peek(long i) const
	{
		NAP_IN_FRAME(12, i);
		return i;
	}
};
} // namespace

extern "C" long rust_legacy(long i) __asm__("_ZN7ttcrate6worker5serve17h0123456789abcdefE");
extern "C" long rust_v0(long i) __asm__("_RNvNtCs1a2b3c_7ttcrate6worker4poll");

extern "C" __attribute__((noinline, used)) long rust_legacy(long i)
{
	NAP_IN_FRAME(4, i);
	return i;
}

extern "C" __attribute__((noinline, used)) long rust_v0(long i)
{
	NAP_IN_FRAME(4, i);
	return i;
}

int main(int argc, char **argv)
{
	if (argc != 3 || strcmp(argv[1], "run")) {
		fprintf(stderr, "usage: demangle_target run N\n");
		return 2;
	}
	long n = atol(argv[2]), sum = 0;
	tt::Worker w;

	for (long i = 0; i < n; i++) {
		sum += w.serve(i);
		sum += tt::overloaded((int)i) + tt::overloaded((double)i);
		sum += rust_legacy(i) + rust_v0(i) + Probe().peek(i);
	}
	printf("rounds=%ld sum=%ld\n", n, sum);
	return 0;
}
