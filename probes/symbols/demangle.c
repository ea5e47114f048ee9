// SPDX-License-Identifier: MIT
/*
 * demangle: C++ (Itanium ABI) and Rust (legacy and v0) symbol names as c++filt
 * and rustfilt print them, by GNU libiberty's demangler (the one c++filt runs;
 * libiberty-dev, linked statically, LGPL-2.1+).
 *
 * Rust first: a legacy Rust name (_ZN...17h<hash>E) is valid C++ too, and
 * rustfilt prints it without its hash, as libiberty's Rust demangler does. C++
 * with c++filt's own options (parameters, const, std:: spelled out).
 */
#include "symbols/syms.h"

#include <stdlib.h>
#include <string.h>
#include <libiberty/demangle.h>

char *syms_demangle(const char *name)
{
	char *d;

	if (name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	d = rust_demangle(name, DMGL_PARAMS | DMGL_ANSI);
	return d ? d : cplus_demangle_v3(name, DMGL_PARAMS | DMGL_ANSI | DMGL_VERBOSE);
}

/* The length of a demangled name without its parameter list and what follows
 * it ("ns::C::f(int) const" -> "ns::C::f", "f() [clone .cold]" -> "f"): the last
 * balanced "(...)" group that only qualifiers follow. Template arguments and
 * "(anonymous namespace)" stay. */
static size_t name_len_without_params(const char *d)
{
	static const char *const tails[] = { " const", " volatile", " &&", " &" };
	size_t n = strlen(d);
	int depth = 0;
	bool again = true;

	while (again) { /* qualifiers and clone suffixes after the parameters */
		again = false;
		if (n && d[n - 1] == ']') {
			const char *b = memchr(d, '[', n);

			for (const char *q = b; q; q = memchr(q + 1, '[', (size_t)(d + n - q - 1)))
				b = q;
			if (b && b > d && b[-1] == ' ')
				n = (size_t)(b - 1 - d), again = true;
		}
		for (unsigned t = 0; t < sizeof(tails) / sizeof(tails[0]); t++) {
			size_t k = strlen(tails[t]);

			if (n > k && !strncmp(d + n - k, tails[t], k))
				n -= k, again = true;
		}
	}
	if (!n || d[n - 1] != ')')
		return strlen(d); /* no parameter list (a Rust path, a C name) */
	for (size_t i = n; i-- > 0;) {
		if (d[i] == ')')
			depth++;
		else if (d[i] == '(' && --depth == 0)
			return i;
	}
	return strlen(d);
}

bool syms_demangled_matches(const char *demangled, const char *want)
{
	size_t n;

	if (!strcmp(demangled, want))
		return true;
	n = name_len_without_params(demangled);
	return n == strlen(want) && !strncmp(demangled, want, n);
}
