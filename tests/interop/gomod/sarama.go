package main

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// The protocol version Sarama is told the broker speaks: it picks each request's version from
// it (Produce v9, Fetch v13, OffsetCommit v8, CreateTopics v7, ...).
var saramaVersion = sarama.V4_0_0_0

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = saramaVersion
	c.ClientID = "ringbroker-interop-gomod"
	c.Net.DialTimeout = *timeout
	c.Net.ReadTimeout = *timeout
	c.Net.WriteTimeout = *timeout
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Flush.Messages = messages // one batch per SendMessages
	c.Producer.Flush.Frequency = 10 * time.Millisecond
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Metadata.Retry.Max = 10
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	return c
}

var saramaCodecs = map[string]sarama.CompressionCodec{
	"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
	"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
}

func saramaMessages(topic, tag string, from, to int) []*sarama.ProducerMessage {
	var batch []*sarama.ProducerMessage
	for i := from; i < to; i++ {
		batch = append(batch, &sarama.ProducerMessage{
			Topic: topic, Partition: 0, Key: sarama.StringEncoder(key(i)), Value: sarama.StringEncoder(value(tag, i)),
			Headers: []sarama.RecordHeader{{Key: []byte("i"), Value: []byte(key(i))}},
		})
	}
	return batch
}

func saramaChecks() {
	what := fmt.Sprintf("sarama %s", saramaVersion)
	admin, err := sarama.NewClusterAdmin([]string{*bootstrap}, saramaConfig())
	if !check(what+": cluster admin", err) {
		return
	}
	defer admin.Close()
	for _, codec := range codecNames {
		topic := fmt.Sprintf("%s-sarama-%s", *prefix, codec)
		w := fmt.Sprintf("%s codec %s", what, codec)
		if !check(w+": create topic", admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)) {
			continue
		}
		cfg := saramaConfig()
		cfg.Producer.Compression = saramaCodecs[codec]
		producer, err := sarama.NewSyncProducer([]string{*bootstrap}, cfg)
		if !check(w+": producer", err) {
			continue
		}
		check(w+": produce", producer.SendMessages(saramaMessages(topic, codec, 0, messages)))
		producer.Close()
		saramaConsume(w, topic, codec, messages)
	}
	saramaIdempotent(what, admin)
	saramaGroup(what, admin)
	saramaAdmin(what, admin)
}

// saramaConsume reads partition 0 of topic from the start and checks n records.
func saramaConsume(what, topic, tag string, n int) {
	consumer, err := sarama.NewConsumer([]string{*bootstrap}, saramaConfig())
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
	var got []record
	for len(got) < n {
		select {
		case m := <-pc.Messages():
			r := record{offset: m.Offset, key: string(m.Key), value: string(m.Value)}
			if len(m.Headers) == 1 {
				r.headerKey, r.headerValue = string(m.Headers[0].Key), string(m.Headers[0].Value)
			}
			got = append(got, r)
		case e := <-pc.Errors():
			fail(what+": consume", e)
			return
		case <-deadline:
			fail(what+": consume", fmt.Sprintf("only %d of %d records", len(got), n))
			return
		}
	}
	if check(what+": every record read back in order", verify(got, 0, tag)) {
		return
	}
}

// saramaIdempotent produces with Producer.Idempotent (InitProducerId, sequence numbers) in two
// SendMessages calls and reads the records back.
func saramaIdempotent(what string, admin sarama.ClusterAdmin) {
	what += " idempotent producer"
	topic := *prefix + "-sarama-idempotent"
	if !check(what+": create topic", admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)) {
		return
	}
	cfg := saramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Compression = sarama.CompressionZSTD
	producer, err := sarama.NewSyncProducer([]string{*bootstrap}, cfg)
	if !check(what+": InitProducerId", err) {
		return
	}
	err = producer.SendMessages(saramaMessages(topic, "idem", 0, messages/2))
	if err == nil {
		err = producer.SendMessages(saramaMessages(topic, "idem", messages/2, messages))
	}
	producer.Close()
	if check(what+": produce", err) {
		saramaConsume(what, topic, "idem", messages)
	}
}

// groupHandler marks and commits (manual commit) records up to `upto`, checks each against the
// topic's contents, then ends its claim.
type groupHandler struct {
	tag  string
	upto int64
	seen chan record
}

func (groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		if m.Offset >= h.upto {
			return nil
		}
		r := record{offset: m.Offset, key: string(m.Key), value: string(m.Value)}
		if len(m.Headers) == 1 {
			r.headerKey, r.headerValue = string(m.Headers[0].Key), string(m.Headers[0].Value)
		}
		s.MarkMessage(m, "")
		if m.Offset == h.upto-1 {
			s.Commit()
		}
		h.seen <- r
		if m.Offset == h.upto-1 {
			return nil
		}
	}
	return nil
}

// saramaGroupRound joins the group, consumes up to offset upto, commits, leaves.
func saramaGroupRound(what, group, topic, tag string, from, upto int) bool {
	cfg := saramaConfig()
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Rebalance.Timeout = *timeout
	cg, err := sarama.NewConsumerGroup([]string{*bootstrap}, group, cfg)
	if !check(what+": join", err) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	h := groupHandler{tag: tag, upto: int64(upto), seen: make(chan record, messages)}
	done := make(chan error, 1)
	go func() { done <- cg.Consume(ctx, []string{topic}, h) }()
	var got []record
	ok := true
	for len(got) < upto-from && ok {
		select {
		case r := <-h.seen:
			got = append(got, r)
		case e := <-cg.Errors():
			fail(what+": consume", e)
			ok = false
		case <-ctx.Done():
			fail(what+": consume", fmt.Sprintf("only %d of %d records", len(got), upto-from))
			ok = false
		}
	}
	cancel()
	<-done
	check(what+": leave", cg.Close())
	return ok && check(fmt.Sprintf("%s: records %d..%d in order", what, from, upto-1), verify(got, from, tag))
}

func saramaCommitted(what string, admin sarama.ClusterAdmin, group, topic string, want int64) {
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
	if !check(what+": OffsetFetch", err) {
		return
	}
	if b := resp.GetBlock(topic, 0); b == nil || b.Err != sarama.ErrNoError || b.Offset != want {
		fail(what+": committed offset", fmt.Sprintf("%+v (want %d)", b, want))
	} else {
		pass(fmt.Sprintf("%s: committed offset is %d", what, want))
	}
}

func saramaGroup(what string, admin sarama.ClusterAdmin) {
	what += " consumer group"
	topic := *prefix + "-sarama-none"
	group := *prefix + "-sarama-group"
	if !saramaGroupRound(what+" (first member)", group, topic, "none", 0, messages/2) {
		return
	}
	saramaCommitted(what+" (first member)", admin, group, topic, messages/2)
	if !saramaGroupRound(what+" (rejoin: resumes at the commit)", group, topic, "none", messages/2, messages) {
		return
	}
	saramaCommitted(what+" (rejoin)", admin, group, topic, messages)
	groups, err := admin.ListConsumerGroups()
	if check(what+": ListGroups", err) {
		if groups[group] != "consumer" {
			fail(what+": ListGroups lists the group", groups)
		}
	}
	desc, err := admin.DescribeConsumerGroups([]string{group})
	if check(what+": DescribeGroups", err) && (len(desc) != 1 || desc[0].State != "Empty" || desc[0].Err != sarama.ErrNoError) {
		fail(what+": DescribeGroups: an empty group", fmt.Sprintf("%+v", desc))
	}
}

func saramaAdmin(what string, admin sarama.ClusterAdmin) {
	topic := *prefix + "-sarama-gzip"
	topics, err := admin.ListTopics()
	if check(what+": ListTopics", err) {
		if d, ok := topics[topic]; !ok || d.NumPartitions != 1 {
			fail(what+": ListTopics shows the topic", fmt.Sprintf("%+v", d))
		}
	}
	retention := "7200000"
	err = admin.IncrementalAlterConfig(sarama.TopicResource, topic,
		map[string]sarama.IncrementalAlterConfigsEntry{"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &retention}}, false)
	check(what+": IncrementalAlterConfigs retention.ms", err)
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if check(what+": DescribeConfigs", err) {
		got := "(absent)"
		for _, e := range entries {
			if e.Name == "retention.ms" {
				got = e.Value
			}
		}
		if got != retention {
			fail(what+": DescribeConfigs shows the altered retention.ms", got)
		}
	}
	victim := *prefix + "-sarama-idempotent"
	if check(what+": DeleteTopics", admin.DeleteTopic(victim)) {
		var left bool
		for i := 0; i < 50; i++ {
			topics, err := admin.ListTopics()
			if _, left = topics[victim]; err == nil && !left {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if left {
			fail(what+": deleted topic no longer listed", "still listed after 5 s")
		}
	}
}
