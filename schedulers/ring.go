package schedulers

// ring is a FIFO queue on a power-of-two circular buffer that doubles when
// full, so pushing and popping cost no allocation once it has grown to the
// working size. It is not safe for concurrent use: the scheduler's mutex
// guards every ring.
type ring[T any] struct {
	buf  []T
	head int // index of the oldest element
	n    int // number of elements
}

// ringShrinkCap is the capacity above which an emptied ring gives its buffer
// back, so that one burst does not pin a large buffer for the life of a
// worker.
const ringShrinkCap = 1024

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

func (r *ring[T]) grow() {
	next := make([]T, max(8, 2*len(r.buf)))
	r.copyTo(next)
	r.buf, r.head = next, 0
}

// copyTo copies the elements, oldest first, to dst (len(dst) >= r.n).
func (r *ring[T]) copyTo(dst []T) {
	k := copy(dst, r.buf[r.head:min(r.head+r.n, len(r.buf))])
	copy(dst[k:r.n], r.buf)
}

// pop removes and returns the oldest element; ok is false when r is empty.
func (r *ring[T]) pop() (v T, ok bool) {
	if r.n == 0 {
		return v, false
	}
	var zero T
	v, r.buf[r.head] = r.buf[r.head], zero // let the collector reclaim what the task captured
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if r.n == 0 {
		r.reset()
	}
	return v, true
}

// popInto moves up to len(dst) of the oldest elements into dst, oldest
// first, and returns how many it moved.
func (r *ring[T]) popInto(dst []T) int {
	k := min(len(dst), r.n)
	for i := range k {
		dst[i], _ = r.pop()
	}
	return k
}

// prepend puts items, in order, before the oldest element. It copies the
// whole queue, which is fine on the rare path that needs it.
func (r *ring[T]) prepend(items []T) {
	if len(items) == 0 {
		return
	}
	rest := r.drain()
	for _, v := range items {
		r.push(v)
	}
	for _, v := range rest {
		r.push(v)
	}
}

// drain removes every element and returns them, oldest first, in a new
// slice (nil when r is empty).
func (r *ring[T]) drain() []T {
	if r.n == 0 {
		return nil
	}
	out := make([]T, r.n)
	r.popInto(out)
	return out
}

func (r *ring[T]) reset() {
	r.head = 0
	if len(r.buf) > ringShrinkCap {
		r.buf = nil
	}
}
