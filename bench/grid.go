package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// Grid values: every id count, group count and handler of the full grid.
var (
	GridKeys     = []int{1, 16, 1024, 100000, 1000000}
	GridGroups   = []int{16, 128, 1024}
	GridHandlers = []Handler{Noop, Spin1us, Sleep50us}
)

// HeadlineCells are the default grid: 128 groups, every id count with the
// no-op handler, and 1,024 ids with the spinning and the blocking handler.
func HeadlineCells() []Cell {
	var cells []Cell
	for _, k := range GridKeys {
		cells = append(cells, Cell{K: k, P: 128, Handler: Noop})
	}
	return append(cells, Cell{K: 1024, P: 128, Handler: Spin1us}, Cell{K: 1024, P: 128, Handler: Sleep50us})
}

// CrossCells returns every combination of handlers, groups and keys.
func CrossCells(handlers []Handler, groups, keys []int) []Cell {
	var cells []Cell
	for _, h := range handlers {
		for _, p := range groups {
			for _, k := range keys {
				cells = append(cells, Cell{K: k, P: p, Handler: h})
			}
		}
	}
	return cells
}

// ParseInts reads a comma-separated list of positive integers.
func ParseInts(s string) ([]int, error) {
	var v []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bench: %q is not a list of positive integers", s)
		}
		v = append(v, n)
	}
	return v, nil
}

// ParseHandlers reads a comma-separated list of handler names.
func ParseHandlers(s string) ([]Handler, error) {
	var v []Handler
	for _, f := range strings.Split(s, ",") {
		h, err := ParseHandler(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		v = append(v, h)
	}
	return v, nil
}
