package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

var kafkaGoCodecs = map[string]kafka.Compression{
	"gzip": kafka.Gzip, "snappy": kafka.Snappy, "lz4": kafka.Lz4, "zstd": kafka.Zstd,
}

func kafkaGoMessages(tag string, from, to int) []kafka.Message {
	var msgs []kafka.Message
	for i := from; i < to; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(key(i)), Value: []byte(value(tag, i)),
			Headers: []kafka.Header{{Key: "i", Value: []byte(key(i))}}})
	}
	return msgs
}

func kafkaGoRecord(m kafka.Message) record {
	r := record{offset: m.Offset, key: string(m.Key), value: string(m.Value)}
	if len(m.Headers) == 1 {
		r.headerKey, r.headerValue = m.Headers[0].Key, string(m.Headers[0].Value)
	}
	return r
}

func kafkaGoChecks() {
	what := "kafka-go 0.4"
	client := &kafka.Client{Addr: kafka.TCP(*bootstrap), Timeout: *timeout}
	ctx, cancel := context.WithTimeout(context.Background(), 4*(*timeout))
	defer cancel()
	for _, codec := range codecNames {
		topic := fmt.Sprintf("%s-kafka-go-%s", *prefix, codec)
		w := fmt.Sprintf("%s codec %s", what, codec)
		resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{
			Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}}})
		if err == nil {
			err = resp.Errors[topic]
		}
		if !check(w+": create topic", err) {
			continue
		}
		writer := &kafka.Writer{Addr: kafka.TCP(*bootstrap), Topic: topic, RequiredAcks: kafka.RequireAll,
			Compression: kafkaGoCodecs[codec], BatchSize: messages, BatchTimeout: 10 * time.Millisecond,
			WriteTimeout: *timeout, ReadTimeout: *timeout, MaxAttempts: 5}
		wctx, wcancel := context.WithTimeout(ctx, *timeout)
		err = writer.WriteMessages(wctx, kafkaGoMessages(codec, 0, messages)...)
		wcancel()
		writer.Close()
		if !check(w+": produce", err) {
			continue
		}
		reader := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{*bootstrap}, Topic: topic, Partition: 0,
			MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond})
		var got []record
		rctx, rcancel := context.WithTimeout(ctx, *timeout)
		for len(got) < messages {
			m, err := reader.ReadMessage(rctx)
			if err != nil {
				fail(w+": consume", fmt.Sprintf("after %d of %d records: %v", len(got), messages, err))
				break
			}
			got = append(got, kafkaGoRecord(m))
		}
		rcancel()
		reader.Close()
		if len(got) == messages {
			check(w+": every record read back in order", verify(got, 0, codec))
		}
	}
	kafkaGoGroup(what, client)
	topic := *prefix + "-kafka-go-gzip"
	offs, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		topic: {kafka.FirstOffsetOf(0), kafka.LastOffsetOf(0)}}})
	if check(what+": ListOffsets", err) {
		p := offs.Topics[topic]
		if len(p) != 1 || p[0].FirstOffset != 0 || p[0].LastOffset != messages || p[0].Error != nil {
			fail(what+": ListOffsets: 0 and "+fmt.Sprint(messages), fmt.Sprintf("%+v", p))
		}
	}
	del, err := client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{*prefix + "-kafka-go-snappy"}})
	if err == nil {
		err = del.Errors[*prefix+"-kafka-go-snappy"]
	}
	check(what+": DeleteTopics", err)
}

// kafkaGoGroupRound reads topic in group with a group reader, commits (synchronously:
// CommitInterval 0) the record before `upto`, and closes the reader (LeaveGroup).
func kafkaGoGroupRound(what, group, topic, tag string, from, upto int) bool {
	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{*bootstrap}, GroupID: group, Topic: topic,
		MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond, StartOffset: kafka.FirstOffset,
		HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
		JoinGroupBackoff: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var got []record
	var last kafka.Message
	for len(got) < upto-from {
		m, err := reader.FetchMessage(ctx)
		if err != nil {
			fail(what+": consume", fmt.Sprintf("after %d of %d records: %v", len(got), upto-from, err))
			reader.Close()
			return false
		}
		got = append(got, kafkaGoRecord(m))
		last = m
	}
	check(what+": commit", reader.CommitMessages(ctx, last))
	check(what+": leave", reader.Close())
	return check(fmt.Sprintf("%s: records %d..%d in order", what, from, upto-1), verify(got, from, tag))
}

func kafkaGoCommitted(what string, client *kafka.Client, group, topic string, want int64) {
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0}}})
	if err == nil {
		err = resp.Error
	}
	if !check(what+": OffsetFetch", err) {
		return
	}
	p := resp.Topics[topic]
	if len(p) != 1 || p[0].CommittedOffset != want || p[0].Error != nil {
		fail(what+": committed offset", fmt.Sprintf("%+v (want %d)", p, want))
	} else {
		pass(fmt.Sprintf("%s: committed offset is %d", what, want))
	}
}

func kafkaGoGroup(what string, client *kafka.Client) {
	what += " consumer group"
	topic := *prefix + "-kafka-go-none"
	group := *prefix + "-kafka-go-group"
	if !kafkaGoGroupRound(what+" (first member)", group, topic, "none", 0, messages/2) {
		return
	}
	kafkaGoCommitted(what+" (first member)", client, group, topic, messages/2)
	if !kafkaGoGroupRound(what+" (rejoin: resumes at the commit)", group, topic, "none", messages/2, messages) {
		return
	}
	kafkaGoCommitted(what+" (rejoin)", client, group, topic, messages)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	resp, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err == nil && len(resp.Groups) != 1 {
		err = fmt.Errorf("%d groups described", len(resp.Groups))
	}
	if err == nil && resp.Groups[0].Error != nil {
		err = resp.Groups[0].Error
	}
	if err == nil && resp.Groups[0].GroupState != "Empty" {
		err = errors.New("state " + resp.Groups[0].GroupState + ", want Empty")
	}
	check(what+": DescribeGroups", err)
}
