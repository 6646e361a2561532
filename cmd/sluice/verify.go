package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/inspect"
	"github.com/sluicedb/sluice/restore"
)

func init() {
	register(command{
		name:    "verify",
		summary: "read every object of a replica and check every checksum; exit 1 naming what is damaged",
		usage: `sluice verify [flags] REPLICA_URL
       sluice verify [flags] DB_PATH       (finds DB_PATH's replica in -config, $LITESTREAM_CONFIG or /etc/litestream.yml)

Reads every LTX object of every level whole: its header must name the TXIDs its
key does, every page must decode and the file checksum must match; where files
carry database checksums, each one's pre-apply checksum must match the
post-apply checksum of the file before it. Then it works out the restore points
the sound objects give, and restores the newest state to a temporary file, which
checks the rebuilt database's checksum as every restore does.

Exit 0: every object is sound and the newest state restores. Exit 1, naming each
object: an object is corrupt, truncated or not what its name says, or the newest
TXID has no chain of sound objects (a missing object). TXIDs that no chain
reaches but the newest state does not need (a range a writer healed with a
snapshot, whose damaged objects it moved to sluice/damaged/) are listed, not
failed. Progress goes to stderr (a bar on a terminal, a line every few seconds
elsewhere).`,
		setup: setupVerify,
	})
}

// verifyReport is what verify found (its -json output).
type verifyReport struct {
	Replica          string         `json:"replica"`
	Objects          int            `json:"objects"`
	Bytes            int64          `json:"bytes"`
	Damaged          []verifyDamage `json:"damaged"`
	LatestTXID       ltx.TXID       `json:"latest_txid"`
	LatestRestorable bool           `json:"latest_restorable"`
	LatestChecksum   string         `json:"latest_checksum,omitempty"`
	RestoreError     string         `json:"restore_error,omitempty"`
	RestoreRanges    []verifyRange  `json:"restore_ranges"`
	Unrestorable     []verifyRange  `json:"unrestorable"`
	MovedAside       []string       `json:"moved_aside"`
	OK               bool           `json:"ok"`
	Seconds          float64        `json:"seconds"`
}

type verifyDamage struct {
	Key   string `json:"key"`
	What  string `json:"damage"`
	Error string `json:"error"`
}

type verifyRange struct {
	From ltx.TXID `json:"from_txid"`
	To   ltx.TXID `json:"to_txid"`
}

// errVerifyFailed: the report says what; the exit code says that.
var errVerifyFailed = errors.New("the replica is damaged")

func setupVerify(fs *flag.FlagSet) runFunc {
	var src replicaSource
	src.flags(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	parallelism := fs.Int("parallelism", 8, "objects read at once")
	quiet := fs.Bool("q", false, "no progress")
	tmp := fs.String("tmp", "", "directory for the trial restore of the newest state (default: the system temp directory)")
	return func(ctx context.Context, args []string) error {
		store, err := src.open(ctx, "verify", args)
		if err != nil {
			return err
		}
		defer store.Close()
		if *parallelism < 1 {
			return usagef("verify", "-parallelism %d: give at least 1", *parallelism)
		}
		rep, err := verifyReplica(ctx, store, *parallelism, *tmp, newVerifyProgress(*quiet))
		if errors.Is(err, inspect.ErrEmpty) {
			return emptyReplicaError(store)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			err = writeJSONOut(os.Stdout, rep)
		} else {
			err = printVerify(os.Stdout, rep)
		}
		if err != nil {
			return err
		}
		if !rep.OK {
			return fmt.Errorf("%w: %s", errVerifyFailed, verifyVerdict(rep))
		}
		return nil
	}
}

// verifyReplica reads and checks every object, then restores the newest state.
func verifyReplica(ctx context.Context, store replica.Store, parallelism int, tmpDir string, prog *verifyProgress) (verifyReport, error) {
	began := time.Now()
	files, err := inspect.Files(ctx, store, inspect.AllLevels)
	if err != nil {
		return verifyReport{}, err
	}
	rep := verifyReport{Replica: store.String(), Objects: len(files), Damaged: []verifyDamage{}, MovedAside: []string{},
		RestoreRanges: []verifyRange{}, Unrestorable: []verifyRange{}}
	if len(files) == 0 {
		return rep, fmt.Errorf("%s: %w", store, inspect.ErrEmpty)
	}
	for _, f := range files {
		rep.Bytes += f.Size
	}
	prog.start(len(files), rep.Bytes)

	// Every object, whole.
	type result struct {
		hdr ltx.Header
		tr  ltx.Trailer
		err error
	}
	results := make([]result, len(files))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(parallelism, len(files)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(files) || ctx.Err() != nil {
					return
				}
				f := files[i]
				lf := replica.LTXFile{Level: f.Level, MinTXID: f.MinTXID, MaxTXID: f.MaxTXID, Size: f.Size, Key: f.Key}
				var r result
				for attempt := 0; attempt < 3; attempt++ { // a read that fails for the store's sake is tried again
					r.hdr, r.tr, r.err = replica.CheckLTX(ctx, store, lf, nil, time.Minute)
					if r.err == nil || errors.Is(r.err, replica.ErrDamaged) || ctx.Err() != nil {
						break
					}
				}
				results[i] = r
				prog.done(f.Size)
			}
		}()
	}
	wg.Wait()
	prog.finish()
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	var sound []inspect.File
	for i, r := range results {
		var de *replica.DamageError
		switch {
		case errors.As(r.err, &de):
			rep.Damaged = append(rep.Damaged, verifyDamage{Key: files[i].Key, What: de.What, Error: de.Err.Error()})
		case r.err != nil:
			return rep, fmt.Errorf("read %s: %w", files[i].Key, r.err)
		default:
			sound = append(sound, files[i])
		}
	}

	// The rolling database checksum, where files carry one: each file's
	// pre-apply checksum is the post-apply checksum of the file it continues.
	post := map[ltx.TXID]ltx.Checksum{} // by MaxTXID
	for i, r := range results {
		if r.err == nil && !r.hdr.NoChecksum() && r.tr.PostApplyChecksum != 0 {
			post[files[i].MaxTXID] = r.tr.PostApplyChecksum
		}
	}
	for i, r := range results {
		if r.err != nil || r.hdr.NoChecksum() || r.hdr.MinTXID == 1 {
			continue
		}
		if want, ok := post[r.hdr.MinTXID-1]; ok && want != r.hdr.PreApplyChecksum {
			rep.Damaged = append(rep.Damaged, verifyDamage{Key: files[i].Key, What: "corrupt",
				Error: fmt.Sprintf("its pre-apply database checksum %s differs from %s, the post-apply checksum of TXID %s", r.hdr.PreApplyChecksum, want, r.hdr.MinTXID-1)})
		}
	}
	// A hole on the way to the newest TXID: the objects that held it are missing.
	var chain []replica.LTXFile
	for _, f := range sound {
		chain = append(chain, replica.LTXFile{Level: f.Level, MinTXID: f.MinTXID, MaxTXID: f.MaxTXID, Size: f.Size, Key: f.Key})
	}
	if from, to, ok := restore.Gap(chain); ok && len(rep.Damaged) == 0 {
		rep.Damaged = append(rep.Damaged, verifyDamage{Key: replica.LTXKey(0, from, to), What: "missing",
			Error: fmt.Sprintf("no object holds TXIDs %d..%d, which the newest state needs", from, to)})
	}
	sort.Slice(rep.Damaged, func(i, j int) bool { return rep.Damaged[i].Key < rep.Damaged[j].Key })

	// The restore points the sound objects give, and the holes between them.
	for _, f := range files {
		rep.LatestTXID = max(rep.LatestTXID, f.MaxTXID)
	}
	points := inspect.RestorePoints(sound)
	var prev ltx.TXID
	for _, p := range points {
		if n := len(rep.RestoreRanges); n > 0 && rep.RestoreRanges[n-1].To+1 == p {
			rep.RestoreRanges[n-1].To = p
		} else {
			rep.RestoreRanges = append(rep.RestoreRanges, verifyRange{From: p, To: p})
			if prev != 0 {
				rep.Unrestorable = append(rep.Unrestorable, verifyRange{From: prev + 1, To: p - 1})
			}
		}
		prev = p
	}
	if len(points) > 0 && points[len(points)-1] < rep.LatestTXID {
		rep.Unrestorable = append(rep.Unrestorable, verifyRange{From: points[len(points)-1] + 1, To: rep.LatestTXID})
	}
	rep.LatestRestorable = len(points) > 0 && points[len(points)-1] == rep.LatestTXID
	if aside, err := store.List(ctx, compact.DamagedPrefix); err == nil {
		for _, o := range aside {
			rep.MovedAside = append(rep.MovedAside, o.Key)
		}
	}

	// The newest state, rebuilt as a restore would: the database checksum.
	if rep.LatestRestorable && len(rep.Damaged) == 0 {
		dir, err := os.MkdirTemp(tmpDir, "sluice-verify-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(dir)
		res, err := restore.Restore(ctx, store, filepath.Join(dir, "verify.db"), restore.Options{Parallelism: parallelism})
		if err != nil {
			rep.LatestRestorable = false
			rep.RestoreError = err.Error()
		} else {
			rep.LatestChecksum = res.Pos.PostApplyChecksum.String()
		}
	}
	rep.OK = len(rep.Damaged) == 0 && rep.LatestRestorable
	rep.Seconds = time.Since(began).Seconds()
	return rep, nil
}

// verifyVerdict is the one-line reason verify fails.
func verifyVerdict(r verifyReport) string {
	var parts []string
	for _, d := range r.Damaged {
		parts = append(parts, fmt.Sprintf("%s is %s", d.Key, d.What))
	}
	if !r.LatestRestorable {
		s := fmt.Sprintf("the newest TXID %d cannot be restored", r.LatestTXID)
		if r.RestoreError != "" {
			s += ": " + r.RestoreError
		} else if n := len(r.Unrestorable); n > 0 {
			s += fmt.Sprintf(" (no sound object holds TXIDs %d..%d)", r.Unrestorable[n-1].From, r.Unrestorable[n-1].To)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func printVerify(w io.Writer, r verifyReport) error {
	fmt.Fprintf(w, "replica:        %s\n", r.Replica)
	fmt.Fprintf(w, "objects read:   %d, %s, in %.1fs\n", r.Objects, formatBytes(r.Bytes), r.Seconds)
	for _, d := range r.Damaged {
		fmt.Fprintf(w, "DAMAGED:        %s (%s): %s\n", d.Key, d.What, d.Error)
	}
	for _, x := range r.RestoreRanges {
		fmt.Fprintf(w, "restorable:     TXIDs %d..%d\n", x.From, x.To)
	}
	for _, x := range r.Unrestorable {
		fmt.Fprintf(w, "not restorable: TXIDs %d..%d\n", x.From, x.To)
	}
	for _, k := range r.MovedAside {
		fmt.Fprintf(w, "moved aside:    %s (a damaged object a writer's snapshot replaced)\n", k)
	}
	if r.LatestChecksum != "" {
		fmt.Fprintf(w, "newest state:   TXID %d restored, database checksum %s\n", r.LatestTXID, r.LatestChecksum)
	}
	if r.OK {
		fmt.Fprintln(w, "OK: every object is sound and the newest state restores")
	} else {
		fmt.Fprintf(w, "FAILED: %s\n", verifyVerdict(r))
	}
	return nil
}

// verifyProgress reports objects and bytes read: a bar on a terminal, a
// line every few seconds on a pipe or log, nothing with -q.
type verifyProgress struct {
	quiet bool
	bar   *progressBar
	mu    sync.Mutex
	objs  int
	total int
	bytes int64
	all   int64
	last  time.Time
}

func newVerifyProgress(quiet bool) *verifyProgress {
	return &verifyProgress{quiet: quiet, bar: newProgressBar(os.Stderr, quiet)}
}

func (p *verifyProgress) start(objects int, bytes int64) {
	p.total, p.all, p.last = objects, bytes, time.Now()
	if !p.quiet && !p.bar.enabled {
		fmt.Fprintf(os.Stderr, "verify: reading %d objects, %s\n", objects, formatBytes(bytes))
	}
}

func (p *verifyProgress) done(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.objs++
	p.bytes += n
	p.bar.update(p.bytes, p.all)
	if !p.quiet && !p.bar.enabled && time.Since(p.last) >= 3*time.Second {
		p.last = time.Now()
		fmt.Fprintf(os.Stderr, "verify: %d of %d objects, %s of %s\n", p.objs, p.total, formatBytes(p.bytes), formatBytes(p.all))
	}
}

func (p *verifyProgress) finish() { p.bar.finish(true) }
