package jetstream

// WithoutReset is the control of the tests: the consumer resumes as the
// server redelivers (no reset to the ack floor on Start), and takes a
// redelivered position below the last one as it comes.
func WithoutReset[T any]() Option[T] { return func(c *config[T]) { c.noReset = true } }
