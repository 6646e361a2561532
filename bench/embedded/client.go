package embedded

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// client talks to the server's JSON API and /metrics.
type client struct {
	base string
	http *http.Client
}

func (c *client) do(method, path, body string) error {
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+rwToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return nil
}

func (c *client) query(sql string, args ...any) ([][]any, error) {
	body, _ := json.Marshal(map[string]any{"sql": sql, "params": args})
	req, _ := http.NewRequest("POST", c.base+"/v1/databases/app/query", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+rwToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%.80s: %d %s", sql, resp.StatusCode, raw)
	}
	var r struct {
		Results []struct {
			Rows [][]any `json:"rows"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Results) != 1 {
		return nil, fmt.Errorf("%.80s: %v %s", sql, err, raw)
	}
	return r.Results[0].Rows, nil
}

func (c *client) one(sql string) (int64, error) {
	rows, err := c.query(sql)
	if err != nil {
		return 0, err
	}
	if len(rows) != 1 || len(rows[0]) != 1 {
		return 0, fmt.Errorf("%s: %v", sql, rows)
	}
	n, _ := rows[0][0].(float64)
	return int64(n), nil
}

func (c *client) databaseBytes() (int64, error) {
	return c.one("SELECT page_count * page_size FROM pragma_page_count, pragma_page_size")
}

func (c *client) maxID() (int64, error) { return c.one("SELECT max(id) FROM t") }

func (c *client) headTXID() (uint64, error) {
	req, _ := http.NewRequest("GET", c.base+"/v1/databases/app", nil)
	req.Header.Set("Authorization", "Bearer "+rwToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var d struct {
		TXID uint64 `json:"txid"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return 0, err
	}
	return d.TXID, nil
}

const (
	syncRoute       = `route="GET /db/{name}/sync/{generation}/{start}/{end}",db="app"}`
	metricSyncSum   = `sluice_http_request_duration_seconds_sum{` + syncRoute
	metricSyncCount = `sluice_http_request_duration_seconds_count{` + syncRoute
	metricSyncUnder = `sluice_http_request_duration_seconds_bucket{route="GET /db/{name}/sync/{generation}/{start}/{end}",db="app",le="0.05"}`
	metricSyncBytes = `sluice_embedded_sync_bytes_total{db="app"}`
	metricAnswers   = `sluice_embedded_sync_answers_total{db="app",answer="`
	metricStorePuts = `sluice_store_put_requests`
)

type scrape map[string]float64

// hranaRequests is how many Hrana requests (pipeline and cursor, every
// version) the server has answered for the database.
func (s scrape) hranaRequests() float64 {
	n := 0.0
	for k, v := range s {
		if strings.HasPrefix(k, "sluice_http_request_duration_seconds_count{") && strings.Contains(k, `db="app"`) &&
			(strings.Contains(k, "/pipeline") || strings.Contains(k, "/cursor")) {
			n += v
		}
	}
	return n
}

func (s scrape) get(series string) float64 { return s[series] }

func (s scrape) syncRequests() float64 { return s[metricSyncCount] }

func (c *client) metrics() (scrape, error) {
	req, _ := http.NewRequest("GET", c.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+rwToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	s := scrape{}
	for _, line := range strings.Split(string(raw), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[i+1:], &v); err == nil {
			s[line[:i]] = v
		}
	}
	return s, nil
}
