package main

import (
	"fmt"
	"strings"
)

// choice is a flag.Value that sets *v to the index of its name in names:
// the flags whose value is one of a few words (-progress, -source, -assign).
type choice[E ~int] struct {
	v     *E
	names []string
}

func (c choice[E]) String() string {
	if c.v == nil { // flag's zero value, asked for its default
		return ""
	}
	return c.names[*c.v]
}

func (c choice[E]) Set(s string) error {
	for i, name := range c.names {
		if s == name {
			*c.v = E(i)
			return nil
		}
	}
	n := len(c.names)
	return fmt.Errorf("want %s or %s, not %q", strings.Join(c.names[:n-1], ", "), c.names[n-1], s)
}
