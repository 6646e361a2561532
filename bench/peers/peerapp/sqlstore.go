package main

import (
	"database/sql"
	"fmt"
	"runtime"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/mattn/go-sqlite3"
)

// sqlStore runs the routes' SQL on SQLite or MariaDB; dialect holds the few
// statements that differ.
type sqlStore struct {
	write, read *sql.DB
	d           dialect
}

type dialect struct {
	schema  map[string]string // family -> CREATE TABLE
	seedRow string            // INSERT OR IGNORE of the counter row
	countUp func(tx *sql.Tx) (int64, error)
}

func openSQLite(path string) (store, error) {
	dsn := "file:" + path + "?_journal_mode=WAL&_busy_timeout=10000&_synchronous=NORMAL&_txlock=immediate"
	w, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, err
	}
	// One writer connection: SQLite takes one writer at a time anyway, and a
	// pool of writers would only spin on the lock.
	w.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, err
	}
	r.SetMaxOpenConns(2 * runtime.NumCPU())
	if err := w.Ping(); err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return &sqlStore{write: w, read: r, d: dialect{
		schema: map[string]string{
			"counters": `CREATE TABLE IF NOT EXISTS counters (id TEXT PRIMARY KEY, count INTEGER NOT NULL)`,
			"t":        `CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON)`,
			"bbs":      `CREATE TABLE IF NOT EXISTS bbs (id INTEGER PRIMARY KEY AUTOINCREMENT, category TEXT, text TEXT)`,
			"d1":       `CREATE TABLE IF NOT EXISTS d1 (id INTEGER PRIMARY KEY, timestamp TEXT, region TEXT)`,
		},
		seedRow: `INSERT OR IGNORE INTO counters (id, count) VALUES ('count_up', 0)`,
		countUp: func(tx *sql.Tx) (n int64, err error) {
			err = tx.QueryRow(`UPDATE counters SET count = count + 1 WHERE id = 'count_up' RETURNING count`).Scan(&n)
			return n, err
		},
	}}, nil
}

func openMariaDB(dsn string) (store, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mariadb DSN %q: %w", dsn, err)
	}
	// Create the database first, through a connection that names none.
	server := cfg.Clone()
	server.DBName = ""
	admin, err := sql.Open("mysql", server.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if err = admin.Ping(); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to mariadb %s: %w", cfg.Addr, err)
	}
	if cfg.DBName != "" {
		if _, err := admin.Exec("CREATE DATABASE IF NOT EXISTS `" + cfg.DBName + "`"); err != nil {
			return nil, fmt.Errorf("create database %s on %s: %w", cfg.DBName, cfg.Addr, err)
		}
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	return &sqlStore{write: db, read: db, d: dialect{
		schema: map[string]string{
			"counters": `CREATE TABLE IF NOT EXISTS counters (id VARCHAR(64) PRIMARY KEY, count BIGINT NOT NULL)`,
			"t":        `CREATE TABLE IF NOT EXISTS t (id BIGINT AUTO_INCREMENT PRIMARY KEY, json JSON)`,
			"bbs":      `CREATE TABLE IF NOT EXISTS bbs (id BIGINT AUTO_INCREMENT PRIMARY KEY, category VARCHAR(64), text TEXT)`,
			"d1":       `CREATE TABLE IF NOT EXISTS d1 (id BIGINT AUTO_INCREMENT PRIMARY KEY, timestamp VARCHAR(40), region VARCHAR(64))`,
		},
		seedRow: `INSERT IGNORE INTO counters (id, count) VALUES ('count_up', 0)`,
		// MariaDB has no UPDATE ... RETURNING: LAST_INSERT_ID(expr) carries the value out.
		countUp: func(tx *sql.Tx) (int64, error) {
			res, err := tx.Exec(`UPDATE counters SET count = LAST_INSERT_ID(count + 1) WHERE id = 'count_up'`)
			if err != nil {
				return 0, err
			}
			return res.LastInsertId()
		},
	}}, nil
}

func (s *sqlStore) Close() error {
	s.read.Close()
	return s.write.Close()
}

func (s *sqlStore) Setup(scenario string) error {
	fam, err := family(scenario)
	if err != nil {
		return err
	}
	if _, err := s.write.Exec(s.d.schema[fam]); err != nil {
		return fmt.Errorf("create table %s: %w", fam, err)
	}
	if fam == "counters" {
		_, err := s.write.Exec(s.d.seedRow)
		return err
	}
	n, err := s.Count(scenario)
	if err != nil {
		return err
	}
	missing := seededRows(scenario) - n
	if missing <= 0 {
		return nil
	}
	tx, err := s.write.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i := int64(0); i < missing; i++ {
		if fam == "bbs" {
			_, err = tx.Exec(`INSERT INTO bbs (category, text) VALUES (?, ?)`, "general", fmt.Sprintf("seeded post %d", i+1))
		} else {
			_, err = tx.Exec(`INSERT INTO d1 (timestamp, region) VALUES (?, ?)`, now(), "seed")
		}
		if err != nil {
			return fmt.Errorf("seed %s: %w", fam, err)
		}
	}
	return tx.Commit()
}

func (s *sqlStore) Count(scenario string) (n int64, err error) {
	fam, err := family(scenario)
	if err != nil {
		return 0, err
	}
	q := "SELECT count(*) FROM " + fam
	if fam == "counters" {
		q = `SELECT count FROM counters WHERE id = 'count_up'`
	}
	err = s.read.QueryRow(q).Scan(&n)
	return n, err
}

func (s *sqlStore) CountUp() (int64, error) {
	tx, err := s.write.Begin()
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	n, err := s.d.countUp(tx)
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

func (s *sqlStore) PutObject(doc string) error {
	_, err := s.write.Exec(`INSERT INTO t (json) VALUES (?)`, doc)
	return err
}

func (s *sqlStore) BBSWrite(category, text string) error {
	_, err := s.write.Exec(`INSERT INTO bbs (category, text) VALUES (?, ?)`, category, text)
	return err
}

func (s *sqlStore) BBSRead(limit int) ([]post, error) {
	q := `SELECT id, category, text FROM bbs`
	if limit > 0 {
		q += fmt.Sprintf(` ORDER BY id DESC LIMIT %d`, limit)
	}
	rows, err := s.read.Query(q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []post
	for rows.Next() {
		var p post
		if err := rows.Scan(&p.ID, &p.Category, &p.Text); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func (s *sqlStore) D1Read() ([]d1row, error) {
	var r d1row
	err := s.read.QueryRow(`SELECT id, timestamp, region FROM d1 LIMIT 1`).Scan(&r.ID, &r.Timestamp, &r.Region)
	if err == sql.ErrNoRows {
		return []d1row{}, nil
	}
	return []d1row{r}, err
}

func (s *sqlStore) D1Write(region string) (d1row, error) {
	r := d1row{Timestamp: now(), Region: region}
	res, err := s.write.Exec(`INSERT INTO d1 (timestamp, region) VALUES (?, ?)`, r.Timestamp, r.Region)
	if err != nil {
		return r, err
	}
	r.ID, err = res.LastInsertId()
	return r, err
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }
