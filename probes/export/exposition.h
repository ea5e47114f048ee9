/* SPDX-License-Identifier: MIT */
/*
 * exposition: the text of a metrics page, whoever renders it (exporter.c's
 * families, exporter_antagonists.c's, the flight recorder's): which format a
 * scraper asks for, a family's # HELP and # TYPE lines, an escaped label value.
 * Formats: Prometheus text exposition 0.0.4 and OpenMetrics 1.0.0.
 */
#ifndef TT_EXPOSITION_H
#define TT_EXPOSITION_H
#include <stdio.h>

enum expo_format {
	EXPO_TEXT,        /* Prometheus text 0.0.4 */
	EXPO_OPENMETRICS, /* OpenMetrics 1.0.0 */
};

/* The format an HTTP Accept header asks for: OpenMetrics when it ranks
 * application/openmetrics-text (version 1.0.0 or unversioned) above
 * text/plain (0.0.4 or unversioned) by q; the text format otherwise. */
enum expo_format expo_negotiate(const char *accept);
/* The # HELP and # TYPE lines of one family. OpenMetrics names a counter's
 * family without the _total its samples carry, and escapes quotes in HELP too. */
void expo_family(FILE *f, enum expo_format fmt, const char *name, const char *type,
		 const char *help);
/* A label value, escaped (backslash, double quote, newline). */
void expo_label_value(FILE *f, const char *v);

#endif
