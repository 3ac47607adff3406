package prommetrics

import (
	"errors"

	"github.com/aggflow/aggflow/dispatch"
)

var (
	// ErrInvalidArgument: a nil dispatcher, or one whose Name is empty, not
	// valid UTF-8 (a label value must be), or panicked.
	ErrInvalidArgument = errors.New("prommetrics: invalid argument")
	// ErrInvalidOption: a namespace that is not a metric name prefix, or
	// histogram buckets that are not finite and strictly increasing.
	ErrInvalidOption = errors.New("prommetrics: invalid option")
	// ErrDuplicate: a dispatcher of that name is registered already.
	ErrDuplicate = errors.New("prommetrics: dispatcher already registered")
)

// PanicError is a recovered panic of a registered dispatcher's methods, read
// at collection: dispatch.PanicError, with the panic value (Value) and the
// stack (Stack).
type PanicError = dispatch.PanicError
