package main

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// inapplicableKeys are Litestream config keys sluice accepts without using,
// with the reason shown in the one-line notice. A key is matched as
// "parent.key" first, then as "key".
var inapplicableKeys = map[string]string{
	"mcp-addr":                    "sluice has no MCP server",
	"levels":                      "sluice compacts on its own schedule (snapshot interval and retention)",
	"validation":                  "sluice verifies checksums on every restore instead",
	"validation-interval":         "sluice verifies checksums on every restore instead",
	"l0-retention-check-interval": "sluice checks level-0 retention at each compaction",
	"verify-compaction":           "sluice checks TXID continuity on every compaction and restore",
	"heartbeat-url":               "use addr: and its /ready endpoint for health checks",
	"heartbeat-interval":          "use addr: and its /ready endpoint for health checks",
	"socket":                      "sluice has no control socket; stop it with SIGTERM",
	"shutdown-sync-timeout":       "sluice ships everything on SIGTERM, bounded by the replica error budget",
	"shutdown-sync-interval":      "sluice ships everything on SIGTERM, bounded by the replica error budget",
	"retention.enabled":           "sluice always enforces retention",
	"retention-check-interval":    "sluice enforces retention at each compaction",
	"max-sync-ltx-files":          "sluice ships every pending change in each sync",
	"auto-recover":                "sluice restarts from a snapshot on its own when the replica does not continue the database",
	"sign-payload":                "sluice always signs S3 requests",
	"require-content-md5":         "sluice checks every object's checksum itself",
	"storage-class":               "sluice writes with the bucket's default storage class",
	"part-size":                   "sluice sizes uploads itself",
	"concurrency":                 "sluice sizes uploads itself",
	"sse-customer-algorithm":      "use the bucket's default encryption",
	"sse-customer-key":            "use the bucket's default encryption",
	"sse-customer-key-path":       "use the bucket's default encryption",
	"sse-kms-key-id":              "use the bucket's default encryption",
	"sas-token":                   "sluice authenticates to Azure with account-name and account-key",
	"name":                        "replicas are named by their URL",
	"meta-path":                   "sluice keeps its position next to the database",
	"meta-dir":                    "sluice keeps its position next to the database",
	"monitor-interval":            "sluice watches the WAL at sync-interval",
	"checkpoint-interval":         "sluice checkpoints by WAL size",
	"busy-timeout":                "sluice waits for the application's locks on its own",
	"min-checkpoint-page-count":   "sluice checkpoints by WAL size",
	"max-checkpoint-page-count":   "sluice checkpoints by WAL size",
	"truncate-page-n":             "sluice checkpoints by WAL size",
	"max-sync-wal-bytes":          "sluice ships every pending change in each sync",
	"logging.source":              "sluice logs without source locations",
	// sftp, webdav and NATS settings only matter for those replica types, which sluice refuses by name.
	"host": "", "user": "", "password": "", "key-path": "", "concurrent-writes": "", "host-key": "",
	"webdav-url": "", "webdav-username": "", "webdav-password": "", "jwt": "", "seed": "", "creds": "",
	"nkey": "", "username": "", "token": "", "tls": "", "root-cas": "", "client-cert": "", "client-key": "",
	"max-reconnects": "", "reconnect-wait": "", "timeout": "",
}

// inapplicableNotices lists one line per key of the config document that
// sluice accepts but does not use.
func inapplicableNotices(raw []byte) []string {
	var doc yaml.Node
	if yaml.Unmarshal(raw, &doc) != nil {
		return nil
	}
	var out []string
	var walk func(n *yaml.Node, parent string)
	walk = func(n *yaml.Node, parent string) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, parent)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := strings.ReplaceAll(n.Content[i].Value, "_", "-")
				name := parent + "." + key
				reason, ok := inapplicableKeys[name]
				if !ok {
					name = key
					reason, ok = inapplicableKeys[key]
				}
				if ok {
					if reason == "" {
						reason = "it applies to replica types sluice does not write to"
					}
					out = append(out, fmt.Sprintf("line %d: %s is accepted and not used: %s", n.Content[i].Line, name, reason))
					continue
				}
				walk(n.Content[i+1], key)
			}
		}
	}
	walk(&doc, "")
	return out
}
