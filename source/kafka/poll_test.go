package kafka_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
)

// A decoder that ends the poll loop's goroutine with runtime.Goexit (what
// t.FailNow does) stops the consumer with an error, as a poll error would:
// the partitions are released, the client closed, and Done closes.
func TestADecoderGoexitStopsTheConsumer(t *testing.T) {
	c := startCluster(t, "exit", 1)
	require.NoError(t, c.Produce(context.Background(), "exit", &kgo.Record{Key: []byte("a"), Value: []byte("1")},
		&kgo.Record{Key: []byte("a"), Value: []byte("exit")}))
	j := newJournal(1)
	exiting := kafka.Codec[event]{Decode: func(key, value []byte) (event, error) {
		if string(value) == "exit" {
			runtime.Goexit()
		}
		return codec.Decode(key, value)
	}, ID: codec.ID}
	k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "exit"}, accounts,
		newScheduler(t, 1), exiting, j.handle, kafka.WithLogger(quiet))
	require.NoError(t, err)
	startConsumer(t, k)
	select {
	case <-k.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the consumer did not stop after its decoder's Goexit")
	}
	require.ErrorIs(t, k.Err(), schedulers.ErrGoexit)
	var pe *kafka.PanicError
	require.ErrorAs(t, k.Err(), &pe)
	j.wait(t, time.Second) // the record before was handled
}

// The poll loop runs user code other than the decoder too: the codec's ID
// (through the partition's intake) and the bad-record hook. Each that ends
// the loop's goroutine with runtime.Goexit stops the consumer with an
// error; the records before are handled, none after, and the commit does
// not pass the record whose user code did not return.
func TestAnIDOrBadRecordHookGoexitStopsTheConsumer(t *testing.T) {
	cases := map[string]func(cd *kafka.Codec[event]) []kafka.Option{
		"Codec.ID": func(cd *kafka.Codec[event]) []kafka.Option {
			cd.ID = func(e event) string {
				if e.Seq == 3 {
					runtime.Goexit()
				}
				return e.ID
			}
			return nil
		},
		"bad-record hook": func(cd *kafka.Codec[event]) []kafka.Option {
			cd.Decode = func(key, value []byte) (event, error) {
				e, err := codec.Decode(key, value)
				if err == nil && e.Seq == 3 {
					err = errors.New("refused")
				}
				return e, err
			}
			return []kafka.Option{kafka.WithBadRecordHook(func(context.Context, *kgo.Record, error) error {
				runtime.Goexit()
				return nil
			})}
		},
	}
	for name, setUp := range cases {
		t.Run(name, func(t *testing.T) {
			c := startCluster(t, "exit", 1)
			var rs []*kgo.Record
			for seq := 1; seq <= 5; seq++ {
				rs = append(rs, &kgo.Record{Key: []byte("a"), Value: []byte(strconv.Itoa(seq))})
			}
			require.NoError(t, c.Produce(context.Background(), "exit", rs...))
			cd := codec
			opts := append(setUp(&cd), kafka.WithLogger(quiet))
			var mu sync.Mutex
			var seen []int
			handler := func(_ context.Context, d partition.Delivery[event]) error {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, d.Exchange.Seq)
				return nil
			}
			k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "exit"}, accounts,
				newScheduler(t, 1), cd, handler, opts...)
			require.NoError(t, err)
			startConsumer(t, k)
			select {
			case <-k.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the consumer did not stop after the Goexit")
			}
			require.ErrorIs(t, k.Err(), schedulers.ErrGoexit)
			mu.Lock()
			assert.Equal(t, []int{1, 2}, seen, "the records before were handled, none after")
			mu.Unlock()
			committed, err := c.Committed(context.Background(), "g", "exit")
			if err == nil { // no commit at all is within the bound too
				assert.LessOrEqual(t, committed[0], int64(2), "the commit does not pass offset 2, whose user code did not return")
			}
		})
	}
}
