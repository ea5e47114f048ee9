// SPDX-License-Identifier: MIT
/* exposition: format negotiation, family headers, label values (exposition.h). */
#include "export/exposition.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* One media range of an Accept header ("type/sub; version=V; q=Q"), split:
 * its type, and its version ("" if none) and q (1 if none). */
struct media_range {
	char type[64], version[16];
	double q;
};

static void media_parse(const char *r, size_t n, struct media_range *m)
{
	char buf[256], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%.*s", (int)n, r);
	m->type[0] = m->version[0] = '\0';
	m->q = 1.0;
	for (tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
		tok += strspn(tok, " \t");
		tok[strcspn(tok, " \t")] = '\0';
		if (!m->type[0])
			snprintf(m->type, sizeof(m->type), "%s", tok);
		else if (!strncasecmp(tok, "version=", 8))
			snprintf(m->version, sizeof(m->version), "%s", tok + 8);
		else if (!strncasecmp(tok, "q=", 2))
			m->q = strtod(tok + 2, NULL);
	}
}

/* s with backslashes and newlines escaped, and double quotes too when quotes. */
static void escape(FILE *f, const char *s, bool quotes)
{
	for (; *s; s++)
		if (*s == '\\' || (quotes && *s == '"'))
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
}

enum expo_format expo_negotiate(const char *accept)
{
	double q_om = 0, q_text = 0;

	for (const char *r = accept; *r;) {
		size_t n = strcspn(r, ",");
		struct media_range m;

		media_parse(r, n, &m);
		if (!strcasecmp(m.type, "application/openmetrics-text") &&
		    (!m.version[0] || !strcmp(m.version, "1.0.0")) && m.q > q_om)
			q_om = m.q;
		else if (!strcasecmp(m.type, "text/plain") &&
			 (!m.version[0] || !strcmp(m.version, "0.0.4")) && m.q > q_text)
			q_text = m.q;
		r += n + (r[n] == ',');
	}
	return q_om > 0 && q_om > q_text ? EXPO_OPENMETRICS : EXPO_TEXT;
}

void expo_family(FILE *f, enum expo_format fmt, const char *name, const char *type,
		 const char *help)
{
	bool om = fmt == EXPO_OPENMETRICS;
	size_t n = strlen(name);

	if (om && !strcmp(type, "counter") && n > 6 && !strcmp(name + n - 6, "_total"))
		n -= 6;
	fprintf(f, "# HELP %.*s ", (int)n, name);
	escape(f, help, om);
	fprintf(f, "\n# TYPE %.*s %s\n", (int)n, name, type);
}

void expo_label_value(FILE *f, const char *v)
{
	escape(f, v, true);
}
