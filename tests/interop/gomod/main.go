// Interop check with current Go clients, pinned in go.mod and built in module mode by
// tests/interop/run.sh: IBM/sarama, segmentio/kafka-go and twmb/franz-go (kgo + kadm). It is
// the module-mode counterpart of tests/interop/go (Debian's Sarama 1.22 and kafka-go 0.2.1, the
// oldest request versions); these clients send today's versions (Fetch v12+ with sessions,
// flexible CreateTopics, IncrementalAlterConfigs, OffsetCommit v8, InitProducerId).
//
// Against a running broker, for each client: create topics, produce with every codec (none,
// gzip, snappy, lz4, zstd) and read every record back (offset, key, value, header, order), a
// consumer group that commits half the records, leaves, and rejoins from the commit, an
// idempotent producer, and admin calls (kadm: list topics, describe and alter a topic config,
// list and describe groups, list offsets, delete a topic).
//
// Prints `PASS gomod: <what>` or `FAIL gomod: <what>: <why>` per check; exits 1 on any FAIL.
// Every wait is bounded by -timeout.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

var (
	bootstrap = flag.String("bootstrap", "127.0.0.1:9092", "broker address")
	prefix    = flag.String("prefix", "gomod", "topic and group name prefix")
	timeout   = flag.Duration("timeout", 30*time.Second, "bound of each wait")
	only      = flag.String("only", "sarama,kafka-go,franz-go", "comma-separated clients to run")
	failed    = false
)

// messages per topic; the consumer groups commit after the first half.
const messages = 20

var codecNames = []string{"none", "gzip", "snappy", "lz4", "zstd"}

func pass(what string) { fmt.Printf("PASS gomod: %s\n", what) }

func fail(what string, err any) {
	failed = true
	fmt.Printf("FAIL gomod: %s: %v\n", what, err)
}

// check reports err (nil = PASS) and tells whether the check passed.
func check(what string, err error) bool {
	if err != nil {
		fail(what, err)
		return false
	}
	pass(what)
	return true
}

func key(i int) string { return fmt.Sprint(i) }

func value(tag string, i int) string {
	return fmt.Sprintf("%s-%d-%s", tag, i, strings.Repeat("x", 100))
}

// record is what a consumer read, in a client-neutral form.
type record struct {
	offset      int64
	key, value  string
	headerKey   string
	headerValue string
}

// verify checks that got[i] is record `from+i` as written with tag (offset, key, value and the
// header "i" = i), and returns a description of the first mismatch.
func verify(got []record, from int, tag string) error {
	for i, r := range got {
		n := from + i
		if r.offset != int64(n) || r.key != key(n) || r.value != value(tag, n) ||
			r.headerKey != "i" || r.headerValue != key(n) {
			return fmt.Errorf("record %d: offset %d key %q value %.20q... header %q=%q", n, r.offset, r.key, r.value, r.headerKey, r.headerValue)
		}
	}
	return nil
}

func main() {
	flag.Parse()
	run := map[string]bool{}
	for _, c := range strings.Split(*only, ",") {
		run[strings.TrimSpace(c)] = true
	}
	if run["sarama"] {
		saramaChecks()
	}
	if run["kafka-go"] {
		kafkaGoChecks()
	}
	if run["franz-go"] {
		franzChecks()
	}
	if failed {
		os.Exit(1)
	}
}
