// Interop check with Go clients from Debian's packages (Sarama 1.22, segmentio kafka-go 0.2.1),
// built in GOPATH mode by tests/interop/run.sh. Against a running broker it creates topics,
// produces with every codec Sarama has and reads the messages back, runs a consumer group whose
// commits are then read back with OffsetFetch, and lists and describes topics and configs.
// These clients send the oldest request versions (Fetch v2/v3, CreateTopics v0, DescribeConfigs
// v0, OffsetCommit v1, ListOffsets v1): a refused request fails a check.
//
// Prints `PASS go: <what>` or `FAIL go: <what>: <why>` per check; exits 1 on any FAIL.
// Every wait is bounded by -timeout.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/Shopify/sarama"
	kafka "github.com/segmentio/kafka-go"
)

var (
	bootstrap = flag.String("bootstrap", "127.0.0.1:9092", "broker address")
	prefix    = flag.String("prefix", "go", "topic and group name prefix")
	timeout   = flag.Duration("timeout", 30*time.Second, "bound of each wait")
	failed    = false
)

const messages = 20

func pass(what string) { fmt.Printf("PASS go: %s\n", what) }

func fail(what string, err interface{}) {
	failed = true
	fmt.Printf("FAIL go: %s: %v\n", what, err)
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

func config(version sarama.KafkaVersion) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = version
	c.ClientID = "ringbroker-interop-go"
	c.Net.DialTimeout = *timeout
	c.Net.ReadTimeout = *timeout
	c.Net.WriteTimeout = *timeout
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Metadata.Retry.Max = 10
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	return c
}

// codecs Sarama can write, with the oldest protocol version that carries each.
var codecs = []struct {
	name    string
	codec   sarama.CompressionCodec
	version sarama.KafkaVersion
}{
	{"none", sarama.CompressionNone, sarama.V0_10_2_0},
	{"gzip", sarama.CompressionGZIP, sarama.V0_10_2_0},
	{"snappy", sarama.CompressionSnappy, sarama.V0_10_2_0},
	{"lz4", sarama.CompressionLZ4, sarama.V0_10_2_0},
	{"zstd", sarama.CompressionZSTD, sarama.V2_1_0_0},
}

func value(codec string, i int) string {
	return fmt.Sprintf("%s-%d-%s", codec, i, strings.Repeat("x", 100))
}

func produceAndConsume(admin sarama.ClusterAdmin) {
	for _, c := range codecs {
		topic := fmt.Sprintf("%s-codec-%s", *prefix, c.name)
		what := fmt.Sprintf("sarama (%s) codec %s", c.version, c.name)
		if !check(what+": create topic", admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)) {
			continue
		}
		cfg := config(c.version)
		cfg.Producer.Compression = c.codec
		producer, err := sarama.NewSyncProducer([]string{*bootstrap}, cfg)
		if !check(what+": producer", err) {
			continue
		}
		var batch []*sarama.ProducerMessage
		for i := 0; i < messages; i++ {
			batch = append(batch, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.StringEncoder(value(c.name, i))})
		}
		check(what+": produce", producer.SendMessages(batch))
		producer.Close()
		consumeAll(what, cfg, topic, c.name)
	}
}

func consumeAll(what string, cfg *sarama.Config, topic, codec string) {
	consumer, err := sarama.NewConsumer([]string{*bootstrap}, cfg)
	if !check(what+": consumer", err) {
		return
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if !check(what+": consume partition", err) {
		return
	}
	defer pc.Close()
	deadline := time.After(*timeout)
	for i := 0; i < messages; i++ {
		select {
		case m := <-pc.Messages():
			if m.Offset != int64(i) || string(m.Value) != value(codec, i) || string(m.Key) != fmt.Sprint(i) {
				fail(what+": consume", fmt.Sprintf("message %d: offset %d key %q value %q", i, m.Offset, m.Key, m.Value))
				return
			}
		case e := <-pc.Errors():
			fail(what+": consume", e)
			return
		case <-deadline:
			fail(what+": consume", fmt.Sprintf("only %d of %d messages", i, messages))
			return
		}
	}
	pass(what + ": every message read back in order")
}

type groupHandler struct{ seen chan int64 }

func (groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		s.MarkMessage(m, "")
		h.seen <- m.Offset
	}
	return nil
}

// consumerGroup consumes a topic in a group with Sarama's default offset settings (OffsetCommit
// v1, whose commits were once dropped), then reads the committed offset back with OffsetFetch.
func consumerGroup(admin sarama.ClusterAdmin) {
	topic := *prefix + "-codec-none"
	group := *prefix + "-group"
	cfg := config(sarama.V0_10_2_0)
	cfg.Consumer.Offsets.CommitInterval = 100 * time.Millisecond
	cg, err := sarama.NewConsumerGroup([]string{*bootstrap}, group, cfg)
	if !check("sarama consumer group: join", err) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	h := groupHandler{seen: make(chan int64, messages)}
	done := make(chan error, 1)
	go func() { done <- cg.Consume(ctx, []string{topic}, h) }()
	got := 0
	for got < messages {
		select {
		case <-h.seen:
			got++
		case e := <-cg.Errors():
			fail("sarama consumer group: consume", e)
		case <-ctx.Done():
			fail("sarama consumer group: consume", fmt.Sprintf("only %d of %d messages", got, messages))
			got = messages + 1
		}
	}
	cancel()
	<-done
	check("sarama consumer group: close (final commit)", cg.Close())
	if got == messages {
		pass("sarama consumer group: every message consumed")
	}

	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
	if !check("OffsetFetch of the group", err) {
		return
	}
	b := resp.GetBlock(topic, 0)
	if b == nil || b.Err != sarama.ErrNoError || b.Offset != messages {
		fail("committed offset on the broker", fmt.Sprintf("%+v (want offset %d)", b, messages))
	} else {
		pass(fmt.Sprintf("committed offset on the broker is %d", messages))
	}
	groups, err := admin.ListConsumerGroups()
	if check("ListGroups", err) {
		if _, ok := groups[group]; !ok {
			fail("ListGroups lists the group", groups)
		} else {
			pass("ListGroups lists the group")
		}
	}
}

func describe(admin sarama.ClusterAdmin) {
	topics, err := admin.ListTopics()
	if check("ListTopics", err) {
		if d, ok := topics[*prefix+"-codec-gzip"]; !ok || d.NumPartitions != 1 {
			fail("ListTopics shows the topic", fmt.Sprintf("%+v", d))
		} else {
			pass("ListTopics shows the topic with its partition count")
		}
	}
	meta, err := admin.DescribeTopics([]string{*prefix + "-codec-gzip"})
	if check("DescribeTopics", err) && (len(meta) != 1 || meta[0].Err != sarama.ErrNoError || len(meta[0].Partitions) != 1) {
		fail("DescribeTopics answer", fmt.Sprintf("%+v", meta))
	}
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: *prefix + "-codec-gzip"})
	if check("DescribeConfigs (v0)", err) {
		found := false
		for _, e := range entries {
			if e.Name == "retention.ms" {
				found = true
			}
		}
		if !found {
			fail("DescribeConfigs lists retention.ms", entries)
		} else {
			pass("DescribeConfigs lists retention.ms")
		}
	}
}

// kafkaGo creates a topic with CreateTopics v0, writes with kafka-go's Produce and reads back
// with its Fetch v2 (message format 1, down-converted by the broker).
func kafkaGo() {
	topic := *prefix + "-kafka-go"
	conn, err := kafka.Dial("tcp", *bootstrap)
	if !check("kafka-go: dial", err) {
		return
	}
	conn.SetDeadline(time.Now().Add(*timeout))
	err = conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: 1})
	conn.Close()
	if !check("kafka-go: CreateTopics v0", err) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	leader, err := kafka.DialLeader(ctx, "tcp", *bootstrap, topic, 0)
	if !check("kafka-go: dial leader", err) {
		return
	}
	defer leader.Close()
	leader.SetDeadline(time.Now().Add(*timeout))
	var msgs []kafka.Message
	for i := 0; i < messages; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprint(i)), Value: []byte(value("kafka-go", i))})
	}
	_, err = leader.WriteMessages(msgs...)
	if !check("kafka-go: produce", err) {
		return
	}
	first, last, err := leader.ReadOffsets()
	if check("kafka-go: ListOffsets", err) && (first != 0 || last != messages) {
		fail("kafka-go: offsets", fmt.Sprintf("first %d last %d", first, last))
	}
	if _, err := leader.Seek(0, kafka.SeekAbsolute); !check("kafka-go: seek", err) {
		return
	}
	batch := leader.ReadBatch(1, 1<<20)
	for i := 0; i < messages; i++ {
		m, err := batch.ReadMessage()
		if err != nil {
			fail("kafka-go: fetch v2", fmt.Sprintf("message %d: %v", i, err))
			batch.Close()
			return
		}
		if m.Offset != int64(i) || string(m.Value) != value("kafka-go", i) {
			fail("kafka-go: fetch v2", fmt.Sprintf("message %d: offset %d value %q", i, m.Offset, m.Value))
			batch.Close()
			return
		}
	}
	batch.Close()
	pass("kafka-go: every message read back with Fetch v2")
}

func main() {
	flag.Parse()
	// 0.11 is the first version Sarama sends DescribeConfigs at (v0); CreateTopics goes as v1.
	admin, err := sarama.NewClusterAdmin([]string{*bootstrap}, config(sarama.V0_11_0_0))
	if !check("sarama cluster admin", err) {
		os.Exit(1)
	}
	produceAndConsume(admin)
	consumerGroup(admin)
	describe(admin)
	admin.Close()
	kafkaGo()
	if failed {
		os.Exit(1)
	}
}
