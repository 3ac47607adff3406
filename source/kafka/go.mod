module github.com/aggflow/aggflow/source/kafka

go 1.26.0

require (
	github.com/aggflow/aggflow v0.5.0
	github.com/cenkalti/backoff/v5 v5.0.3
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kadm v1.20.0
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	go.uber.org/goleak v1.3.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/cenkalti/backoff/v4 v4.0.0 // indirect
	github.com/emirpasic/gods v1.12.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/reactivex/rxgo/v2 v2.5.0 // indirect
	github.com/stretchr/objx v0.5.3 // indirect
	github.com/teivah/onecontext v0.0.0-20200513185103-40f981bfd775 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

replace github.com/aggflow/aggflow => ../..
