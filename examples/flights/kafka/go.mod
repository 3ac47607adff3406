module github.com/aggflow/aggflow/examples/flights/kafka

go 1.26.0

require (
	github.com/aggflow/aggflow v0.5.0
	github.com/aggflow/aggflow/examples/flights v0.5.0
	github.com/aggflow/aggflow/source/kafka v0.5.0
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kadm v1.20.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/andybalholm/brotli v1.1.1 // indirect
	github.com/cenkalti/backoff/v4 v4.0.0 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/emirpasic/gods v1.12.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/parquet-go/bitpack v1.0.0 // indirect
	github.com/parquet-go/jsonlite v1.0.0 // indirect
	github.com/parquet-go/parquet-go v0.32.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/reactivex/rxgo/v2 v2.5.0 // indirect
	github.com/stretchr/objx v0.5.3 // indirect
	github.com/teivah/onecontext v0.0.0-20200513185103-40f981bfd775 // indirect
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	github.com/twpayne/go-geom v1.6.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/aggflow/aggflow => ../../..
	github.com/aggflow/aggflow/examples/flights => ..
	github.com/aggflow/aggflow/observe => ../../../observe
	github.com/aggflow/aggflow/source/jetstream => ../../../source/jetstream
	github.com/aggflow/aggflow/source/kafka => ../../../source/kafka
)
