// gohttp: a Go net/http server for the spans tests (tests/probes/test_spans.py).
//
//	gohttp [ADDR]   serve on ADDR (default 127.0.0.1:0) and print "listening HOST:PORT";
//	                on SIGTERM or SIGINT print "served N" and exit 0.
//
// main.handler serves every request; every 10th one recurses 2,000 frames
// deep first, so its goroutine stack grows and the runtime copies it while
// the handler's frame is on it: a uretprobe there kills the server.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

var served atomic.Int64

//go:noinline
func deep(n int) int {
	var pad [64]byte
	pad[n%64] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%64]&1)
}

//go:noinline
func handler(w http.ResponseWriter, r *http.Request) {
	n := served.Add(1)
	d := 1
	if n%10 == 0 {
		d = 2000
	}
	fmt.Fprintf(w, "ok %d\n", deep(d))
}

func main() {
	addr := "127.0.0.1:0"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gohttp:", err)
		os.Exit(1)
	}
	fmt.Println("listening", ln.Addr())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go http.Serve(ln, http.HandlerFunc(handler))
	<-stop
	fmt.Println("served", served.Load())
}
