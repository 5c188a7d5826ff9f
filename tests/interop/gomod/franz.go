package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var franzCodecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

func franzClient(opts ...kgo.Opt) (*kgo.Client, error) {
	opts = append([]kgo.Opt{kgo.SeedBrokers(*bootstrap), kgo.ClientID("ringbroker-interop-gomod"),
		kgo.DialTimeout(*timeout), kgo.RequestTimeoutOverhead(*timeout), kgo.RetryTimeout(*timeout)}, opts...)
	return kgo.NewClient(opts...)
}

func franzRecords(topic, tag string, from, to int) []*kgo.Record {
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key(i)), Value: []byte(value(tag, i)),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(key(i))}}})
	}
	return rs
}

func franzRecord(r *kgo.Record) record {
	out := record{offset: r.Offset, key: string(r.Key), value: string(r.Value)}
	if len(r.Headers) == 1 {
		out.headerKey, out.headerValue = r.Headers[0].Key, string(r.Headers[0].Value)
	}
	return out
}

func franzChecks() {
	what := "franz-go"
	cl, err := franzClient()
	if !check(what+": client", err) {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 4*(*timeout))
	defer cancel()
	for _, codec := range codecNames {
		topic := fmt.Sprintf("%s-franz-%s", *prefix, codec)
		w := fmt.Sprintf("%s codec %s", what, codec)
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if !check(w+": create topic", err) {
			continue
		}
		// The default producer is idempotent (InitProducerId, sequence numbers, acks=all).
		p, err := franzClient(kgo.ProducerBatchCompression(franzCodecs[codec]), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(10*time.Millisecond))
		if !check(w+": producer", err) {
			continue
		}
		pctx, pcancel := context.WithTimeout(ctx, *timeout)
		results := p.ProduceSync(pctx, franzRecords(topic, codec, 0, messages)...)
		pcancel()
		p.Close()
		if err := results.FirstErr(); !check(w+": idempotent produce", err) {
			continue
		}
		if r := results[0].Record; r.ProducerID < 0 || r.ProducerEpoch < 0 {
			fail(w+": idempotent produce has a producer id", fmt.Sprintf("id %d epoch %d", r.ProducerID, r.ProducerEpoch))
		}
		franzConsume(w, topic, codec)
	}
	// The other clients' topics, read back by franz-go: each batch must carry its codec.
	if topics, err := adm.ListTopics(ctx); err == nil {
		for _, client := range []string{"sarama", "kafka-go"} {
			for _, codec := range codecNames {
				topic := fmt.Sprintf("%s-%s-%s", *prefix, client, codec)
				if topics.Has(topic) {
					franzConsume(fmt.Sprintf("%s reads %s's %s topic", what, client, codec), topic, codec)
				}
			}
		}
	}
	group := franzGroup(what, adm)
	franzAdmin(what, adm, group)
}

var codecIDs = map[string]uint8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// franzConsume reads partition 0 of topic from the start (direct, no group) and checks it, and
// that every batch is compressed with the codec `tag` names.
func franzConsume(what, topic, tag string) {
	c, err := franzClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	if !check(what+": consumer", err) {
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var got []record
	var codecErr error
	for len(got) < messages {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			fail(what+": consume", fmt.Sprintf("only %d of %d records", len(got), messages))
			return
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("%s[%d]: %w", t, p, err) })
		if ferr != nil {
			fail(what+": consume", ferr)
			return
		}
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, franzRecord(r))
			if c := r.Attrs.CompressionType(); c != codecIDs[tag] && codecErr == nil {
				codecErr = fmt.Errorf("record %d is in a batch of codec %d, want %d (%s)", r.Offset, c, codecIDs[tag], tag)
			}
		})
	}
	if len(got) != messages {
		fail(what+": consume", fmt.Sprintf("%d records, want %d", len(got), messages))
		return
	}
	if check(what+": every record read back in order", verify(got, 0, tag)) {
		check(what+": every batch in codec "+tag, codecErr)
	}
}

// franzGroupRound consumes topic in group (manual commits) until record upto-1, commits the
// records it got (OffsetCommit), and leaves the group (Close sends LeaveGroup).
func franzGroupRound(what, group, topic, tag string, from, upto int) bool {
	c, err := franzClient(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second))
	if !check(what+": client", err) {
		return false
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var got []*kgo.Record
	for len(got) < upto-from {
		fs := c.PollRecords(ctx, upto-from-len(got))
		if ctx.Err() != nil {
			fail(what+": consume", fmt.Sprintf("only %d of %d records", len(got), upto-from))
			return false
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("%s[%d]: %w", t, p, err) })
		if ferr != nil {
			fail(what+": consume", ferr)
			return false
		}
		got = append(got, fs.Records()...)
	}
	var rs []record
	for _, r := range got {
		rs = append(rs, franzRecord(r))
	}
	if !check(what+": commit", c.CommitRecords(ctx, got...)) {
		return false
	}
	return check(fmt.Sprintf("%s: records %d..%d in order", what, from, upto-1), verify(rs, from, tag))
}

func franzCommitted(what string, adm *kadm.Client, group, topic string, want int64) {
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if !check(what+": OffsetFetch", err) {
		return
	}
	if o, ok := offs.Lookup(topic, 0); !ok || o.At != want {
		fail(what+": committed offset", fmt.Sprintf("%+v (want %d)", o, want))
	} else {
		pass(fmt.Sprintf("%s: committed offset is %d", what, want))
	}
}

func franzGroup(what string, adm *kadm.Client) string {
	what += " consumer group"
	topic := *prefix + "-franz-none"
	group := *prefix + "-franz-group"
	if !franzGroupRound(what+" (first member)", group, topic, "none", 0, messages/2) {
		return group
	}
	franzCommitted(what+" (first member)", adm, group, topic, messages/2)
	if !franzGroupRound(what+" (rejoin: resumes at the commit)", group, topic, "none", messages/2, messages) {
		return group
	}
	franzCommitted(what+" (rejoin)", adm, group, topic, messages)
	return group
}

// franzAdmin: kadm's list topics, describe and alter a topic config, list and describe groups,
// list offsets and delete a topic.
func franzAdmin(what string, adm *kadm.Client, group string) {
	what += " kadm"
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	topic := *prefix + "-franz-gzip"
	topics, err := adm.ListTopics(ctx)
	if err == nil {
		err = topics.Error()
	}
	if check(what+": ListTopics", err) {
		if d, ok := topics[topic]; !ok || len(d.Partitions) != 1 || d.Partitions[0].Leader < 0 {
			fail(what+": ListTopics shows the topic with a led partition", fmt.Sprintf("%+v", d))
		}
	}
	retention := func() (string, error) {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			return "", err
		}
		rc, err := rcs.On(topic, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			return "", err
		}
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" && c.Value != nil {
				return fmt.Sprintf("%s (%s)", *c.Value, c.Source), nil
			}
		}
		return "", errors.New("no retention.ms among the topic's configs")
	}
	if v, err := retention(); check(what+": DescribeConfigs", err) && v != "604800000 (DEFAULT_CONFIG)" {
		fail(what+": DescribeConfigs retention.ms", v+", want 604800000 (DEFAULT_CONFIG)")
	}
	hour := "3600000"
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &hour}}, topic)
	if err == nil {
		_, err = alt.On(topic, nil)
	}
	if err == nil {
		err = alt[0].Err
	}
	if check(what+": IncrementalAlterConfigs retention.ms", err) {
		if v, err := retention(); err != nil || v != hour+" (DYNAMIC_TOPIC_CONFIG)" {
			fail(what+": DescribeConfigs after the alter", fmt.Sprintf("%s %v, want %s (DYNAMIC_TOPIC_CONFIG)", v, err, hour))
		} else {
			pass(what + ": DescribeConfigs shows the altered retention.ms")
		}
	}
	groups, err := adm.ListGroups(ctx)
	if check(what+": ListGroups", err) {
		if g, ok := groups[group]; !ok || g.ProtocolType != "consumer" {
			fail(what+": ListGroups lists the group", fmt.Sprintf("%+v", groups))
		}
	}
	dg, err := adm.DescribeGroups(ctx, group)
	if err == nil {
		err = dg.Error()
	}
	if check(what+": DescribeGroups", err) {
		if g := dg[group]; g.State != "Empty" || g.ProtocolType != "consumer" || len(g.Members) != 0 {
			fail(what+": DescribeGroups: an empty consumer group", fmt.Sprintf("%+v", g))
		}
	}
	start, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = start.Error()
	}
	end, err2 := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = errors.Join(err2, end.Error())
	}
	if check(what+": ListOffsets", err) {
		s, _ := start.Lookup(topic, 0)
		e, _ := end.Lookup(topic, 0)
		if s.Offset != 0 || e.Offset != messages {
			fail(what+": ListOffsets: start 0, end "+fmt.Sprint(messages), fmt.Sprintf("start %+v end %+v", s, e))
		}
	}
	victim := *prefix + "-franz-snappy"
	del, err := adm.DeleteTopics(ctx, victim)
	if err == nil {
		err = del.Error()
	}
	if check(what+": DeleteTopics", err) {
		var left bool
		for i := 0; i < 50; i++ {
			// Asked of the broker: kadm answers ListTopics from the client's metadata cache,
			// which keeps the deleted topic for MetadataMinAge (5 s), unless authorized
			// operations are asked for too.
			topics, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx))
			if left = topics.Has(victim); err == nil && !left {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if left {
			fail(what+": deleted topic no longer listed", "still listed after 5 s")
		}
	}
}
