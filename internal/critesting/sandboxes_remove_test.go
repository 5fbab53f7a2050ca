package critesting

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRemoveSandboxes(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		f     fakeRuntime
		calls []string
		err   []string // what the error says, all of it; none for nil
	}{
		{desc: "none"},
		{desc: "each stopped, then removed", f: fakeRuntime{sandboxes: []string{"a", "b"}}, calls: []string{"stop a", "remove a", "stop b", "remove b"}},
		{
			desc:  "on past failures, all of them returned",
			f:     fakeRuntime{sandboxes: []string{"a", "b"}, fail: map[string]error{"stop a": errors.New("busy"), "remove b": errors.New("gone")}},
			calls: []string{"stop a", "remove a", "stop b", "remove b"},
			err:   []string{"stop pod sandbox a: busy", "remove pod sandbox b: gone"},
		},
		{desc: "the list fails", f: fakeRuntime{listErr: errors.New("unavailable")}, err: []string{"list pod sandboxes: unavailable"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := RemoveSandboxes(&tc.f)
			if !slices.Equal(tc.f.calls, tc.calls) {
				t.Errorf("calls %q, want %q", tc.f.calls, tc.calls)
			}
			if (err != nil) != (len(tc.err) > 0) {
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
			for _, want := range tc.err {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
