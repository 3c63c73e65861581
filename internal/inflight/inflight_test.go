package inflight

import (
	"testing"
	"time"
)

// Wait waits for the work counted, also work added while it waits; Enter
// fails once Close was called, Add does not.
func TestCounter(t *testing.T) {
	var c Counter
	if !c.Enter() {
		t.Fatal("Enter before Close failed")
	}
	waited := make(chan struct{})
	go func() { c.Wait(); close(waited) }()
	c.Add() // while Wait runs
	c.Done()
	select {
	case <-waited:
		t.Fatal("Wait returned with work still counted")
	case <-time.After(20 * time.Millisecond):
	}
	c.Close()
	if c.Enter() {
		t.Fatal("Enter after Close succeeded")
	}
	c.Done()
	<-waited
}
