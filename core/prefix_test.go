package core

import (
	"errors"
	"strings"
	"testing"
)

// A bad Config.Prefix is a configuration mistake like a bad policy: callers
// tell it apart with errors.Is(err, ErrInvalidPolicy), and the message names
// the field.
func TestNewBadPrefixIsInvalidPolicy(t *testing.T) {
	for _, prefix := range []string{"app{1}", "my app", "é", strings.Repeat("p", MaxNameLen+1)} {
		l, err := New(Config{Policy: testPolicy, Algorithm: counter{}, Store: newMapStore(), Prefix: prefix})
		if err == nil || l != nil {
			t.Fatalf("New(Prefix %q) = %v, %v; want an error", prefix, l, err)
		}
		if !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("New(Prefix %q) error %q does not match ErrInvalidPolicy", prefix, err)
		}
		if !strings.Contains(err.Error(), "Config.Prefix") {
			t.Errorf("New(Prefix %q) error %q does not name Config.Prefix", prefix, err)
		}
	}
	for _, prefix := range []string{"", "app", "a:b.c_d-e", strings.Repeat("p", MaxNameLen)} {
		if _, err := New(Config{Policy: testPolicy, Algorithm: counter{}, Store: newMapStore(), Prefix: prefix}); err != nil {
			t.Errorf("New(Prefix %q): %v", prefix, err)
		}
	}
}
