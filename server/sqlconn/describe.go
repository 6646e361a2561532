package sqlconn

import (
	"context"
	"strings"

	"github.com/sluicedb/sluice/internal/sqlitestmt"
	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dberr"
)

// Describe prepares sql without running it. ReadOnly is SQLite's own
// verdict (sqlite3_stmt_readonly) for every statement in sql, as prepared on
// this connection now; EXPLAIN counts as a read. Params and Columns describe
// the last statement, the one whose result Exec returns.
func (c *Handle) Describe(ctx context.Context, sql string) (d Description, err error) {
	if strings.IndexByte(sql, 0) >= 0 {
		return Description{}, errNUL
	}
	c.intr.arm(ctx, c.timeout)
	c.g.reset()
	defer func() {
		if p := recover(); p != nil {
			d, err = Description{}, panicError(p)
		}
		c.intr.disarm()
		err = c.sqlError(err, false)
	}()
	d.ReadOnly = true
	rest, ran := sql, false
	for !ran || !sqltext.IsBlank(rest) {
		if _, next, ok := leadingAlterColumn(rest); ok { // a write SQLite cannot prepare
			d.ReadOnly, d.Explain, d.Params, d.Columns = false, false, nil, nil
			rest, ran = next, true
			continue
		}
		s, next, finalize, err := c.prepare(rest)
		if err != nil {
			return Description{}, err
		}
		if finalize && len(next) == len(rest) {
			s.Finalize()
			return Description{}, dberr.New(dberr.CodeSQLiteError, "cannot parse the SQL text")
		}
		rest, ran = next, true
		if !sqlitestmt.Empty(s) {
			explain := c.in.Explain(s)
			d.ReadOnly = d.ReadOnly && (explain || c.in.ReadOnly(s))
			d.Explain, d.Params, d.Columns = explain, nil, c.columns(s)
			for i := 1; i <= s.BindParamCount(); i++ {
				d.Params = append(d.Params, s.BindParamName(i))
			}
		}
		if finalize {
			s.Finalize()
		}
	}
	return d, nil
}
