// Command standin plays the parts of the images critest pulls that are more
// than busybox, chosen by the name it is installed under:
//
//	/pause            the sandbox image: waits for SIGTERM or SIGINT
//	/usr/sbin/nginx   nginx:1.14-2: re-executes itself titled "nginx: master process ...",
//	                  writes /var/run/nginx.pid and serves a page on :80
//	/usr/sbin/httpd   httpd:2.4.39-4: logs "httpd" and serves a page on :80
//	/usr/bin/nnp      nonewprivs:1.3 (installed setuid root): prints "Effective uid: N"
//
// It is built static (CGO_ENABLED=0) so that it runs in any image.
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const nginxTitle = "nginx: master process nginx -g daemon off;"

func main() {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	switch filepath.Base(exe) {
	case "pause":
		waitForSignal()
	case "nginx":
		if !strings.HasPrefix(os.Args[0], "nginx: master") {
			// /proc/1/cmdline shows the title, /proc/1/comm stays "nginx".
			fail(syscall.Exec(exe, []string{nginxTitle}, os.Environ()))
		}
		fail(os.MkdirAll("/var/run", 0o755))
		fail(os.WriteFile("/var/run/nginx.pid", []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644))
		serve(":80", "nginx")
	case "httpd":
		fmt.Fprintln(os.Stderr, "httpd: stand-in serving on :80")
		serve(":80", "httpd")
	case "nnp":
		fmt.Printf("Effective uid: %d\n", os.Geteuid())
	default:
		fmt.Fprintf(os.Stderr, "standin: unknown part %q (install as pause, nginx, httpd or nnp)\n", filepath.Base(exe))
		os.Exit(2)
	}
}

func serve(addr, name string) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<html><body>%s stand-in</body></html>\n", name)
	})
	go func() { fail(http.ListenAndServe(addr, h)) }()
	waitForSignal()
}

func waitForSignal() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		os.Exit(1)
	}
}
