package queue_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gosafetensors/safetensors/internal/hubtest"
	"github.com/gosafetensors/safetensors/queue"
)

// TestMain runs a worker process when the fault test re-executes the
// test binary as one.
func TestMain(m *testing.M) {
	if os.Getenv("QUEUE_TEST_WORKER") == "1" {
		os.Exit(workerProcess())
	}
	os.Exit(hubtest.Main(m))
}

// workerProcess is one worker of the pool: it runs until SIGTERM, then
// drains and exits 0.
func workerProcess() int {
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	nc, err := nats.Connect(os.Getenv("QUEUE_NATS"))
	if err != nil {
		log.Error("connect", "error", err.Error())
		return 2
	}
	defer nc.Close()
	w, err := queue.New(nc, queue.WithResults(os.Getenv("QUEUE_RESULTS")), queue.WithEventLocation(os.Getenv("QUEUE_LOCATION")),
		queue.WithConcurrency(2), queue.WithAckWait(time.Second), queue.WithRetryDelay(50*time.Millisecond),
		queue.WithPollWait(200*time.Millisecond), queue.WithDrainTimeout(20*time.Second), queue.WithLogger(log))
	if err != nil {
		log.Error("new", "error", err.Error())
		return 2
	}
	defer w.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Error("run", "error", err.Error())
		return 1
	}
	return 0
}
