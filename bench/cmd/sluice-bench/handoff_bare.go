package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicedb/sluice/internal/minioproc"
)

// bareRequests times n conditional PUTs of a 4 KiB object (as a
// transaction file is shipped) and n GETs of it, one at a time, through
// the same endpoint (and proxy) as the instances: the reference beside
// which the follower lag and the hand-off gaps are read.
func bareRequests(ctx context.Context, m *minioproc.Server, bucket string, n int) (put50, get50, get99 time.Duration, err error) {
	client := m.Client()
	body := bytes.Repeat([]byte{'x'}, 4096)
	prefix := fmt.Sprintf("bare/%d-", time.Now().UnixNano())
	var puts, gets []time.Duration
	for i := 0; i < n+5; i++ { // the first 5 warm the connection
		key := fmt.Sprintf("%s%d", prefix, i)
		start := time.Now()
		if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
			Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))), IfNoneMatch: aws.String("*")}); err != nil {
			return 0, 0, 0, fmt.Errorf("bare PUT: %w", err)
		}
		put := time.Since(start)
		start = time.Now()
		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			return 0, 0, 0, fmt.Errorf("bare GET: %w", err)
		}
		_, err = io.Copy(io.Discard, out.Body)
		out.Body.Close()
		if err != nil {
			return 0, 0, 0, fmt.Errorf("bare GET: %w", err)
		}
		if i >= 5 {
			puts, gets = append(puts, put), append(gets, time.Since(start))
		}
	}
	sort.Slice(puts, func(i, j int) bool { return puts[i] < puts[j] })
	sort.Slice(gets, func(i, j int) bool { return gets[i] < gets[j] })
	return puts[len(puts)/2], gets[len(gets)/2], gets[min(len(gets)-1, len(gets)*99/100)], nil
}
