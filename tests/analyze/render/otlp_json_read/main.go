// otlp-json-read: reads OTLP/JSON lines (one ExportTraceServiceRequest each, as the
// Collector's file exporter writes them) from stdin with the OpenTelemetry Collector's own
// decoder (pdata's ptrace.JSONUnmarshaler) and prints one JSON object per span: its ids in
// hex, its kind and status as integers, its times, its attributes and links, and its
// resource's attributes. The tests' independent reader of what `analyze export otlp --file`
// writes: a line the Collector cannot decode is an error (exit 1, naming the line).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

type link struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
}

type span struct {
	TraceID  string         `json:"trace_id"`
	SpanID   string         `json:"span_id"`
	Parent   string         `json:"parent"`
	Name     string         `json:"name"`
	Kind     int            `json:"kind"`
	Start    uint64         `json:"start_unix_nano"`
	End      uint64         `json:"end_unix_nano"`
	Attrs    map[string]any `json:"attributes"`
	Resource map[string]any `json:"resource"`
	Scope    string         `json:"scope"`
	Links    []link         `json:"links"`
}

func hexOrEmpty(empty bool, s string) string {
	if empty {
		return ""
	}
	return s
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<30)
	out := json.NewEncoder(os.Stdout)
	var dec ptrace.JSONUnmarshaler
	for n := 1; in.Scan(); n++ {
		td, err := dec.UnmarshalTraces(in.Bytes())
		if err != nil {
			fmt.Fprintf(os.Stderr, "otlp-json-read: line %d: %v\n", n, err)
			os.Exit(1)
		}
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			res := rs.Resource().Attributes().AsRaw()
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j)
				for k := 0; k < ss.Spans().Len(); k++ {
					printSpan(out, ss.Spans().At(k), res, ss.Scope().Name())
				}
			}
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "otlp-json-read: %v\n", err)
		os.Exit(1)
	}
}

func printSpan(out *json.Encoder, sp ptrace.Span, res map[string]any, scope string) {
	s := span{
		TraceID:  sp.TraceID().String(),
		SpanID:   sp.SpanID().String(),
		Parent:   hexOrEmpty(sp.ParentSpanID().IsEmpty(), sp.ParentSpanID().String()),
		Name:     sp.Name(),
		Kind:     int(sp.Kind()),
		Start:    uint64(sp.StartTimestamp()),
		End:      uint64(sp.EndTimestamp()),
		Attrs:    sp.Attributes().AsRaw(),
		Resource: res,
		Scope:    scope,
		Links:    []link{},
	}
	for i := 0; i < sp.Links().Len(); i++ {
		l := sp.Links().At(i)
		s.Links = append(s.Links, link{l.TraceID().String(), l.SpanID().String()})
	}
	if err := out.Encode(s); err != nil {
		fmt.Fprintf(os.Stderr, "otlp-json-read: %v\n", err)
		os.Exit(1)
	}
}
