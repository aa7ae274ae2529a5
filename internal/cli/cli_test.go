package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func run(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsageErrorsExitTwoAndSayWhy(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Usage:"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"detect", "-for"}, "flag needs an argument"},
		{[]string{"detect", "extra"}, "unexpected arguments"},
		{[]string{"status", "-dsn", ""}, "no database"},
	} {
		t.Setenv("HOTCOUNTER_DSN", "")
		code, _, errOut := run(tc.args...)
		if code != ExitError || !strings.Contains(errOut, tc.want) {
			t.Errorf("hotcounter %q exited %d with %q; want %d and %q", tc.args, code, errOut, ExitError, tc.want)
		}
	}
}

func TestHelpExitsZeroAndListsFlags(t *testing.T) {
	if code, out, _ := run("help"); code != ExitOK || !strings.Contains(out, "detect") || !strings.Contains(out, "status") {
		t.Fatalf("help exited %d: %s", code, out)
	}
	for cmd, flag := range map[string]string{"detect": "-for", "status": "-widest"} {
		code, _, errOut := run(cmd, "-h")
		if code != ExitOK || !strings.Contains(errOut, "usage: hotcounter "+cmd) || !strings.Contains(errOut, flag) {
			t.Errorf("%s -h exited %d: %s", cmd, code, errOut)
		}
	}
}
