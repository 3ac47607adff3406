package job

import (
	"fmt"
	"strings"
)

// Choice is a flag.Value that sets *V to the index of its name in Names:
// the flags whose value is one of a few words (-progress, -source, -assign).
type Choice[E ~int] struct {
	V     *E
	Names []string
}

func (c Choice[E]) String() string {
	if c.V == nil { // flag's zero value, asked for its default
		return ""
	}
	return c.Names[*c.V]
}

func (c Choice[E]) Set(s string) error {
	for i, name := range c.Names {
		if s == name {
			*c.V = E(i)
			return nil
		}
	}
	n := len(c.Names)
	return fmt.Errorf("want %s or %s, not %q", strings.Join(c.Names[:n-1], ", "), c.Names[n-1], s)
}
