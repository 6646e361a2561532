package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/bench/netdelay"
	"github.com/sluicedb/sluice/bench/targets"
	"github.com/sluicedb/sluice/replica"
)

type syncAnswer struct {
	SyncMs []float64 `json:"syncMs"`
	MaxID  int64     `json:"maxId"`
}

// measureReads runs the point reads on every replica at once, locally,
// then over Hrana from the same processes.
func measureReads(o Options, c *client, far *netdelay.Proxy, workers []*worker, rep *Report, out io.Writer) error {
	type reads struct {
		Lat []float64 `json:"lat"`
		Ms  float64   `json:"ms"`
	}
	run := func(where string, n int) ([]reads, error) {
		res := make([]reads, len(workers))
		return res, callAll(workers, map[string]any{"op": "reads", "where": where, "n": n, "maxId": o.Rows}, res)
	}
	// One client alone first (the others idle): its own read rates,
	// locally and over Hrana, with the machine's cores not shared among
	// the bench's own processes.
	// The Hrana requests a read took tell how many round trips it pays.
	alone := workers[:1]
	var perRead float64
	one := func(where string, n int) (reads, error) {
		var r reads
		before, err := c.metrics()
		if err != nil {
			return r, err
		}
		if err := alone[0].call(map[string]any{"op": "reads", "where": where, "n": n, "maxId": o.Rows}, &r); err != nil {
			return r, err
		}
		after, err := c.metrics()
		perRead = (after.hranaRequests() - before.hranaRequests()) / float64(n)
		return r, err
	}
	l1, err := one("local", o.Reads)
	if err != nil {
		return err
	}
	h1, err := one("remote", o.HranaReads)
	if err != nil {
		return err
	}
	rep.HranaRequestsPerRead = perRead
	rep.AloneLocalPerSec = float64(len(l1.Lat)) / (l1.Ms / 1000)
	rep.AloneHranaPerSec = float64(len(h1.Lat)) / (h1.Ms / 1000)
	rep.AloneRatio = rep.AloneLocalPerSec / rep.AloneHranaPerSec
	rep.AloneLocalP50us, rep.AloneHranaP50us = pct(l1.Lat, 50), pct(h1.Lat, 50)
	fmt.Fprintf(out, "point reads by one client alone, a writer inserting every %s (%d CPUs):\n", o.WriteEvery, runtime.NumCPU())
	fmt.Fprintf(out, "  local (embedded replica):  p50 %8.1f µs  p99 %8.1f µs  %9.0f reads/s\n", pct(l1.Lat, 50), pct(l1.Lat, 99), rep.AloneLocalPerSec)
	fmt.Fprintf(out, "  Hrana on loopback:         p50 %8.1f µs  p99 %8.1f µs  %9.0f reads/s (%.2f requests per read)\n", pct(h1.Lat, 50), pct(h1.Lat, 99), rep.AloneHranaPerSec, perRead)
	if far != nil {
		conns := far.Accepted()
		f1, err := one("far", o.HranaReads)
		if err != nil {
			return err
		}
		rep.FarPerSec = float64(len(f1.Lat)) / (f1.Ms / 1000)
		rep.FarP50us = pct(f1.Lat, 50)
		rep.FarRatio = rep.AloneLocalPerSec / rep.FarPerSec
		fmt.Fprintf(out, "  Hrana across a %s round trip: p50 %8.1f µs  p99 %8.1f µs  %9.0f reads/s (%.0f µs more at p50; %.2f requests per read, %d connections for %d reads)\n",
			o.ClientRTT, rep.FarP50us, pct(f1.Lat, 99), rep.FarPerSec, rep.FarP50us-rep.AloneHranaP50us, perRead, far.Accepted()-conns, o.HranaReads)
		fmt.Fprintf(out, "  local/Hrana read rate: %.0f× on loopback, %.0f× across a %s round trip\n", rep.AloneRatio, rep.FarRatio, o.ClientRTT)
	} else {
		fmt.Fprintf(out, "  local/Hrana read rate: %.0f×\n", rep.AloneRatio)
	}

	local, err := run("local", o.Reads)
	if err != nil {
		return err
	}
	remote, err := run("remote", o.HranaReads)
	if err != nil {
		return err
	}
	var all [2][]float64
	rate := [2]float64{}
	rep.ReadRatio = 0
	for i := range workers {
		all[0] = append(all[0], local[i].Lat...)
		all[1] = append(all[1], remote[i].Lat...)
		l, h := float64(len(local[i].Lat))/(local[i].Ms/1000), float64(len(remote[i].Lat))/(remote[i].Ms/1000)
		rate[0] += l
		rate[1] += h
		if r := l / h; rep.ReadRatio == 0 || r < rep.ReadRatio {
			rep.ReadRatio = r
		}
	}
	rep.LocalP50us, rep.LocalP99us = pct(all[0], 50), pct(all[0], 99)
	rep.HranaP50us, rep.HranaP99us = pct(all[1], 50), pct(all[1], 99)
	rep.LocalPerSec, rep.HranaPerSec = rate[0], rate[1]
	fmt.Fprintf(out, "point reads, %d replicas at once, a writer inserting every %s:\n", len(workers), o.WriteEvery)
	fmt.Fprintf(out, "  local (embedded replica): p50 %8.1f µs  p99 %8.1f µs  %9.0f reads/s in all\n", rep.LocalP50us, rep.LocalP99us, rep.LocalPerSec)
	fmt.Fprintf(out, "  Hrana (same clients):     p50 %8.1f µs  p99 %8.1f µs  %9.0f reads/s in all\n", rep.HranaP50us, rep.HranaP99us, rep.HranaPerSec)
	fmt.Fprintf(out, "  local/Hrana read rate, per client (lowest): %.0f× (the %d clients' local reads share the machine's %d CPUs)\n", rep.ReadRatio, len(workers), runtime.NumCPU())
	return nil
}

// lagFigures are one follow phase's figures.
type lagFigures struct {
	P50ms, P99ms                float64 // acknowledgement → visible after the sync() that showed it
	SyncP99ms, BeforeP99ms      float64 // that sync()'s duration; the time before it began
	SyncP50ms, AllSyncP99ms     float64 // every sync()'s duration
	MaxSyncMs                   float64
	Syncs, Pairs, Acked         int
	Requests, BytesPerReq       float64
	ServerUsPerReq, CPUusPerReq float64
	Answers                     string
	SlowRequests                float64 // sync requests over 50 ms of server time
}

// measureLag has every replica sync in a loop while the writer inserts,
// and matches each acknowledged write to the first sync() after which the
// replica showed it. The lag is the time from the write's acknowledgement
// (its answer reaching the writer) to the end of that sync() and of the
// local read that showed the row. With wait, the replicas sync through the
// waiting URL (a second replica each, bootstrapped first).
func measureLag(o Options, c *client, pid int, workers []*worker, wr *writer, wait bool) (lagFigures, error) {
	type follow struct {
		Points [][2]float64 `json:"points"`
		SyncMs []float64    `json:"syncMs"`
	}
	var lf lagFigures
	each := func(ms int64, res []follow) error {
		return callAll(workers, map[string]any{"op": "follow", "ms": ms, "intervalMs": 0, "wait": wait}, res)
	}
	if wait { // bootstrap the waiting replicas outside the measurement
		if err := each(0, make([]follow, len(workers))); err != nil {
			return lf, err
		}
	}
	before, err := c.metrics()
	if err != nil {
		return lf, err
	}
	cpu0, _ := targets.CPUTime(pid)
	res := make([]follow, len(workers))
	from := time.Now()
	if err := each(o.Follow.Milliseconds(), res); err != nil {
		return lf, err
	}
	cpu1, _ := targets.CPUTime(pid)
	after, err := c.metrics()
	if err != nil {
		return lf, err
	}
	acks := wr.since(from)
	lf.Acked = len(acks)
	// Each lag is split in two: from the acknowledgement to the start of
	// the sync() that showed the write (waiting for the loop to come
	// round, and for the syncs before it that did not show it yet), and
	// that sync()'s own duration (its requests and the client's apply).
	var lags, befores, durs, allSyncs []float64
	for _, f := range res {
		lf.Syncs += len(f.Points)
		allSyncs = append(allSyncs, f.SyncMs...)
		j := 0
		for _, a := range acks { // acks and points both in time order
			for j < len(f.Points) && (f.Points[j][0] < a.at || int64(f.Points[j][1]) < a.id) {
				j++
			}
			if j == len(f.Points) {
				break // acknowledged after this replica's last sync
			}
			lag := f.Points[j][0] - a.at
			lags = append(lags, lag)
			d := 0.0
			if j < len(f.SyncMs) {
				d = min(f.SyncMs[j], lag)
			}
			durs = append(durs, d)
			befores = append(befores, lag-d)
		}
	}
	lf.Pairs = len(lags)
	lf.P50ms, lf.P99ms = pct(lags, 50), pct(lags, 99)
	lf.SyncP50ms, lf.AllSyncP99ms, lf.MaxSyncMs = pct(allSyncs, 50), pct(allSyncs, 99), pct(allSyncs, 100)
	lf.SyncP99ms, lf.BeforeP99ms = pct(durs, 99), pct(befores, 99)
	lf.Requests = after.syncRequests() - before.syncRequests()
	if lf.Requests > 0 {
		lf.BytesPerReq = (after.get(metricSyncBytes) - before.get(metricSyncBytes)) / lf.Requests
		lf.ServerUsPerReq = 1e6 * (after.get(metricSyncSum) - before.get(metricSyncSum)) / lf.Requests
		lf.CPUusPerReq = float64((cpu1 - cpu0).Microseconds()) / lf.Requests
	}
	lf.Answers = answerKinds(before, after)
	lf.SlowRequests = lf.Requests - (after.get(metricSyncUnder) - before.get(metricSyncUnder))
	return lf, nil
}

// printLag prints one follow phase.
func printLag(out io.Writer, o Options, lf lagFigures, wait bool, dbBytes int64) {
	if wait {
		fmt.Fprintf(out, "sync() in a loop through the waiting URL (.../wait/%s/: a sync with nothing new answers when the next transaction ships) on every replica for %s (%d writes acknowledged meanwhile):\n", o.SyncWait, o.Follow, lf.Acked)
	} else {
		fmt.Fprintf(out, "sync() in a loop on every replica for %s while the writer inserts (%d writes acknowledged meanwhile):\n", o.Follow, lf.Acked)
	}
	fmt.Fprintf(out, "  lag from a write's acknowledgement to its visibility after sync() (the end of the sync() after which a local read shows it): p50 %.1f ms  p99 %.1f ms (%d write×replica pairs)\n", lf.P50ms, lf.P99ms, lf.Pairs)
	fmt.Fprintf(out, "  of which: the sync() that showed the write p99 %.1f ms; before it began (the loop coming round) p99 %.1f ms; every sync() p50 %.1f ms p99 %.1f ms max %.1f ms\n",
		lf.SyncP99ms, lf.BeforeP99ms, lf.SyncP50ms, lf.AllSyncP99ms, lf.MaxSyncMs)
	fmt.Fprintf(out, "  %d syncs (%.0f sync requests: %s): %.0f bytes per request, database %d KiB; server time %.0f µs per request; server CPU %.0f µs per request (writes included); %.0f requests over 50 ms of server time\n",
		lf.Syncs, lf.Requests, lf.Answers, lf.BytesPerReq, dbBytes>>10, lf.ServerUsPerReq, lf.CPUusPerReq, lf.SlowRequests)
}

// measureEmptySyncs has every replica sync with nothing new.
func measureEmptySyncs(o Options, c *client, pid int, workers []*worker, rep *Report, out io.Writer) error {
	for _, w := range workers { // catch up first: what follows is empty
		var s syncAnswer
		if err := w.call(map[string]any{"op": "sync", "n": 1}, &s); err != nil {
			return err
		}
	}
	before, err := c.metrics()
	if err != nil {
		return err
	}
	cpu0, _ := targets.CPUTime(pid)
	res := make([]syncAnswer, len(workers))
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.call(map[string]any{"op": "sync", "n": o.EmptySyncs}, &res[i])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	cpu1, _ := targets.CPUTime(pid)
	after, err := c.metrics()
	if err != nil {
		return err
	}
	var client []float64
	for _, r := range res {
		client = append(client, r.SyncMs...)
	}
	syncs := after.syncRequests() - before.syncRequests()
	rep.EmptySyncs = len(client)
	if syncs > 0 {
		rep.EmptySyncServerUs = 1e6 * (after.get(metricSyncSum) - before.get(metricSyncSum)) / syncs
		rep.EmptySyncCPUus = float64((cpu1 - cpu0).Microseconds()) / syncs
	}
	rep.EmptySyncClientP50ms = pct(client, 50)
	rep.EmptySyncStoreRequests = after.get(metricStorePuts) - before.get(metricStorePuts)
	moved := after.get(metricSyncBytes) - before.get(metricSyncBytes)
	fmt.Fprintf(out, "%d syncs with nothing new (%d per replica, at once): %.0f sync requests (%.2f per sync()), %.0f bytes of pages moved, %.0f store PUTs\n",
		len(client), o.EmptySyncs, syncs, syncs/float64(len(client)), moved, rep.EmptySyncStoreRequests)
	fmt.Fprintf(out, "  server time %.0f µs per request, server CPU %.0f µs per request; client sync() p50 %.2f ms\n",
		rep.EmptySyncServerUs, rep.EmptySyncCPUus, rep.EmptySyncClientP50ms)
	return nil
}

// measureCommitsSync makes Commits single-row commits, then one replica
// syncs once; what it moved is compared with the pages those commits
// changed, read from their level-0 files in the bucket.
func measureCommitsSync(ctx context.Context, o Options, c *client, store replica.Store, w *worker, rep *Report, out io.Writer) error {
	next, err := c.maxID()
	if err != nil {
		return err
	}
	wr := &writer{c: c, next: next + 1}
	// Each commit's level-0 file is read as soon as it is acknowledged
	// (compaction may merge it away later).
	pages := map[uint32]bool{}
	var from, to uint64
	for i := range o.Commits {
		if err := wr.insert(); err != nil {
			return err
		}
		txid, err := c.headTXID()
		if err != nil {
			return err
		}
		if i == 0 {
			from = txid
		}
		to = txid
		if err := filePages(ctx, store, txid, pages); err != nil {
			return err
		}
	}
	before, err := c.metrics()
	if err != nil {
		return err
	}
	var s syncAnswer
	if err := w.call(map[string]any{"op": "sync", "n": 1}, &s); err != nil {
		return err
	}
	after, err := c.metrics()
	if err != nil {
		return err
	}
	rep.CommitsSyncBytes = int64(after.get(metricSyncBytes) - before.get(metricSyncBytes))
	rep.CommitsChangedPages = len(pages)
	rep.CommitsSyncBytesPerPage = float64(rep.CommitsSyncBytes) / float64(len(pages)*4096)
	rep.CommitsSyncAnswers = answerKinds(before, after)
	fmt.Fprintf(out, "one sync() after %d single-row commits (TXIDs %d-%d): %d bytes moved (%s) for %d changed pages (%d bytes): %.2f× the changed pages\n",
		o.Commits, from, to, rep.CommitsSyncBytes, rep.CommitsSyncAnswers, len(pages), len(pages)*4096, rep.CommitsSyncBytesPerPage)
	return nil
}

// filePages adds the pages TXID txid's level-0 file changed, read through
// sluice's own store (its key layout in the bucket).
func filePages(ctx context.Context, store replica.Store, txid uint64, pages map[uint32]bool) error {
	key := replica.LTXKey(0, ltx.TXID(txid), ltx.TXID(txid))
	rc, err := replica.Sub(store, "app").Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read app/%s: %w", key, err)
	}
	body, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return err
	}
	dec := ltx.NewDecoder(bytes.NewReader(body))
	if err := dec.DecodeHeader(); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	buf := make([]byte, dec.Header().PageSize)
	for {
		var ph ltx.PageHeader
		if err := dec.DecodePage(&ph, buf); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		pages[ph.Pgno] = true
	}
}

// answerKinds counts the sync answers by kind between two scrapes.
func answerKinds(before, after scrape) string {
	var kinds []string
	for _, k := range []string{"diff", "end", "database", "export"} {
		if n := after.get(metricAnswers+k+`"}`) - before.get(metricAnswers+k+`"}`); n > 0 {
			kinds = append(kinds, fmt.Sprintf("%.0f %s", n, k))
		}
	}
	return strings.Join(kinds, ", ")
}

// callAll sends req to every worker at once; res[i] holds worker i's answer.
func callAll[T any](workers []*worker, req map[string]any, res []T) error {
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.call(req, &res[i])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
