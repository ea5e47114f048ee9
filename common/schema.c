/* SPDX-License-Identifier: MIT */
#include "schema.h"
#include "json_out.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <tailtrace/records.h>

/* Emit one field: called with the struct name bound by the X-macro below. */
#define FIELD_JSON(st, t, n, c)                                                  \
	fprintf(out, "%s{\"name\": \"%s\", \"type\": \"%s\", \"offset\": %zu, \"count\": %d}", \
		sep, #n, #t, offsetof(struct st, n), (c));                         \
	sep = ", ";

static void print_kind(FILE *out, const char *kind, const char *file, int type,
		       size_t size, void (*fields)(FILE *), const char *lead)
{
	fprintf(out, "%s\n    \"%s\": {\"type\": %d, \"size\": %zu, \"file\": \"%s\", \"fields\": [",
		lead, kind, type, size, file);
	fields(out);
	fprintf(out, "]}");
}

/* One fields-printer per record kind, each generated from its field list. */
#define GEN_FIELDS(kind, st, id, FIELDS, file)                                   \
	static void fields_##kind(FILE *out)                                     \
	{                                                                        \
		const char *sep = "";                                            \
		FIELDS(F1_##kind, A1_##kind)                                     \
	}
#define F1_request(t, n) FIELD_JSON(tt_request, t, n, 1)
#define A1_request(t, n, c) FIELD_JSON(tt_request, t, n, c)
#define F1_runq(t, n) FIELD_JSON(tt_runq, t, n, 1)
#define A1_runq(t, n, c) FIELD_JSON(tt_runq, t, n, c)
#define F1_switch(t, n) FIELD_JSON(tt_switch, t, n, 1)
#define A1_switch(t, n, c) FIELD_JSON(tt_switch, t, n, c)
#define F1_lock(t, n) FIELD_JSON(tt_lock, t, n, 1)
#define A1_lock(t, n, c) FIELD_JSON(tt_lock, t, n, c)
#define F1_span(t, n) FIELD_JSON(tt_span, t, n, 1)
#define A1_span(t, n, c) FIELD_JSON(tt_span, t, n, c)
#define F1_task(t, n) FIELD_JSON(tt_task, t, n, 1)
#define A1_task(t, n, c) FIELD_JSON(tt_task, t, n, c)
#define F1_occ(t, n) FIELD_JSON(tt_occ, t, n, 1)
#define A1_occ(t, n, c) FIELD_JSON(tt_occ, t, n, c)
#define F1_occupant(t, n) FIELD_JSON(tt_occupant, t, n, 1)
#define A1_occupant(t, n, c) FIELD_JSON(tt_occupant, t, n, c)
#define F1_span_context(t, n) FIELD_JSON(tt_span_context, t, n, 1)
#define A1_span_context(t, n, c) FIELD_JSON(tt_span_context, t, n, c)
TT_RECORD_KINDS(GEN_FIELDS)

int schema_print(FILE *out)
{
	const char *lead = "";

	fprintf(out, "{\"magic\": \"%s\", \"header_size\": %zu, \"records\": {",
		TT_FILE_MAGIC, sizeof(struct tt_file_header));
#define PRINT_KIND(kind, st, id, FIELDS, file)                                   \
	print_kind(out, #kind, file, id, sizeof(struct st), fields_##kind, lead); \
	lead = ",";
	TT_RECORD_KINDS(PRINT_KIND)
#undef PRINT_KIND
	fprintf(out, "\n}}\n");
	return ferror(out) ? -EIO : 0;
}

static int schema_body(FILE *f, const void *arg)
{
	(void)arg;
	return schema_print(f);
}

int schema_write_dir(const char *dir)
{
	return json_write_file(dir, "schema.json", schema_body, NULL);
}
