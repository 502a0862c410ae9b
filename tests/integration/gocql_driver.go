// gocql (Debian's golang-github-gocql-gocql-dev) against a real cassinid,
// with no special options: protocol negotiation, DDL, prepared statements,
// paging, a logged batch, token-aware routing metadata, and the errors Go
// programs test for. Prints one JSON object for test_gocql_driver.py.
//
// go run gocql_driver.go HOST
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/gocql/gocql"
)

func must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
}

// Addr is ks.addr as a struct with cql tags.
type Addr struct {
	Street string `cql:"street"`
	Zip    int    `cql:"zip"`
}

// datamodel: UDTs through map[string]interface{} and a tagged struct
// (frozen and not), tuples, durations, counters, and MapScanCAS /
// ScanCAS for lightweight transactions.
func datamodel(session *gocql.Session, out map[string]interface{}) {
	for _, q := range []string{
		"CREATE TYPE go.addr (street text, zip int)",
		"CREATE TABLE go.dm (k int PRIMARY KEY, a addr, f frozen<addr>, " +
			"pts list<frozen<addr>>, pm map<text, frozen<addr>>, " +
			"tp tuple<int, text>, d duration)",
		"CREATE TABLE go.ctr (k int PRIMARY KEY, n counter)",
		"CREATE TABLE go.lwt (k int PRIMARY KEY, v text, n int)",
	} {
		must(session.Query(q).Exec(), q)
	}
	// gocql 1.3.2 counts a tuple marker as one bind value per component
	// but marshals the values against the markers (frame.go readCol): a
	// tuple cannot be bound; it is a literal here and read back by Scan,
	// which takes one destination per component.
	must(session.Query("INSERT INTO go.dm (k, a, f, pts, pm, tp, d) "+
		"VALUES (?, ?, ?, ?, ?, (7, 'seven'), ?)", 1,
		map[string]interface{}{"street": "main", "zip": 10},
		Addr{"frozen", 5}, []Addr{{"p", 1}, {"q", 2}},
		map[string]Addr{"m": {"mm", 3}},
		gocql.Duration{Months: 1, Days: 2, Nanoseconds: 3}).Exec(), "dm insert")
	must(session.Query("UPDATE go.dm SET a.zip = ? WHERE k = ?", 20, 1).Exec(),
		"field update")
	must(session.Query("INSERT INTO go.dm (k, a, d) VALUES (2, ?, 1h30m)",
		Addr{"struct", 2}).Exec(), "struct insert")
	must(session.Query("DELETE a.street FROM go.dm WHERE k = 2").Exec(),
		"field delete")

	var a map[string]interface{}
	var f Addr
	var pts []Addr
	var pm map[string]Addr
	var tn int
	var ts string
	var d gocql.Duration
	must(session.Query("SELECT a, f, pts, pm, tp, d FROM go.dm WHERE k = 1").
		Scan(&a, &f, &pts, &pm, &tn, &ts, &d), "dm select")
	out["udt_map"] = a
	out["udt_struct"] = f
	out["udt_list"] = pts
	out["udt_in_map"] = pm
	out["tuple"] = []interface{}{tn, ts}
	out["duration"] = d
	var a2 Addr
	var d2 gocql.Duration
	must(session.Query("SELECT a, d FROM go.dm WHERE k = 2").Scan(&a2, &d2),
		"struct select")
	out["udt_struct2"] = a2
	out["duration2"] = d2
	row := map[string]interface{}{}
	must(session.Query("SELECT a, tp FROM go.dm WHERE k = 1").MapScan(row),
		"mapscan")
	out["mapscan"] = row

	for i := int64(1); i <= 5; i++ {
		must(session.Query("UPDATE go.ctr SET n = n + ? WHERE k = ?", i, 1).Exec(),
			"counter")
	}
	must(session.Query("UPDATE go.ctr SET n = n - ? WHERE k = ?", 3, 1).Exec(),
		"counter minus")
	b := session.NewBatch(gocql.CounterBatch)
	b.Query("UPDATE go.ctr SET n = n + ? WHERE k = ?", 100, 2)
	b.Query("UPDATE go.ctr SET n = n + ? WHERE k = ?", 1, 1)
	must(session.ExecuteBatch(b), "counter batch")
	ctr := map[string]int64{}
	iter := session.Query("SELECT k, n FROM go.ctr").Iter()
	var k int
	var n int64
	for iter.Scan(&k, &n) {
		ctr[fmt.Sprint(k)] = n
	}
	must(iter.Close(), "counter select")
	out["counter"] = ctr

	ins := "INSERT INTO go.lwt (k, v, n) VALUES (?, ?, ?) IF NOT EXISTS"
	first := map[string]interface{}{}
	applied1, err := session.Query(ins, 1, "first", 1).MapScanCAS(first)
	must(err, "cas 1")
	second := map[string]interface{}{}
	applied2, err := session.Query(ins, 1, "second", 2).MapScanCAS(second)
	must(err, "cas 2")
	var old string
	applied3, err := session.Query("UPDATE go.lwt SET v = ? WHERE k = ? IF v = ?",
		"third", 1, "nope").ScanCAS(&old)
	must(err, "cas 3")
	applied4, err := session.Query("UPDATE go.lwt SET v = ? WHERE k = ? IF v = ?",
		"third", 1, "first").ScanCAS(&old)
	must(err, "cas 4")
	out["cas"] = map[string]interface{}{
		"applied": []bool{applied1, applied2, applied3, applied4},
		"first":   first, "second": second, "old": old}
}

func main() {
	cluster := gocql.NewCluster(os.Args[1])
	cluster.Timeout = 10 * time.Second
	cluster.ConnectTimeout = 10 * time.Second
	session, err := cluster.CreateSession()
	must(err, "connect")
	defer session.Close()
	out := map[string]interface{}{}

	var release string
	must(session.Query("SELECT release_version FROM system.local").Scan(&release),
		"system.local")
	out["release"] = release

	must(session.Query("CREATE KEYSPACE IF NOT EXISTS go WITH replication = "+
		"{'class': 'SimpleStrategy', 'replication_factor': 1}").Exec(), "keyspace")
	must(session.Query("CREATE TABLE IF NOT EXISTS go.t (k int, c int, v text, "+
		"tags set<text>, PRIMARY KEY (k, c))").Exec(), "table")
	for c := 0; c < 30; c++ {
		must(session.Query("INSERT INTO go.t (k, c, v, tags) VALUES (?, ?, ?, ?)",
			1, c, fmt.Sprintf("v%d", c), []string{"a", "b"}).Exec(), "insert")
	}
	var v string
	var tags []string
	must(session.Query("SELECT v, tags FROM go.t WHERE k = ? AND c = ?", 1, 3).
		Consistency(gocql.One).Scan(&v, &tags), "select one")
	sort.Strings(tags)
	out["row3"] = []interface{}{v, tags}

	// Paging: 30 rows in pages of 7.
	iter := session.Query("SELECT c FROM go.t WHERE k = ?", 1).PageSize(7).Iter()
	var cs []int
	var c int
	for iter.Scan(&c) {
		cs = append(cs, c)
	}
	must(iter.Close(), "paging")
	out["paged"] = cs

	b := session.NewBatch(gocql.LoggedBatch)
	b.Query("INSERT INTO go.t (k, c, v) VALUES (?, ?, ?)", 2, 1, "x")
	b.Query("INSERT INTO go.t (k, c, v) VALUES (?, ?, ?)", 3, 1, "y")
	must(session.ExecuteBatch(b), "batch")
	var n int
	must(session.Query("SELECT count(*) FROM go.t WHERE k IN (2, 3)").Scan(&n),
		"count")
	out["batch"] = n

	km, err := session.KeyspaceMetadata("go")
	must(err, "metadata")
	tm := km.Tables["t"]
	out["table"] = map[string]interface{}{
		"pk": len(tm.PartitionKey), "ck": len(tm.ClusteringColumns),
		"columns": len(tm.Columns)}

	err = session.Query("SELEC nope").Exec()
	var reqErr gocql.RequestError
	if errors.As(err, &reqErr) {
		out["syntax"] = reqErr.Code()
	}
	err = session.Query("SELECT * FROM go.nope").Exec()
	if errors.As(err, &reqErr) {
		out["invalid"] = map[string]interface{}{
			"code": reqErr.Code(), "message": reqErr.Message()}
	}
	err = session.Query("INSERT INTO go.t (k, c, v) VALUES (9, 9, 'z')").
		Consistency(gocql.Three).Exec()
	var un *gocql.RequestErrUnavailable
	if errors.As(err, &un) {
		out["unavailable"] = map[string]interface{}{
			"required": un.Required, "alive": un.Alive}
	}
	must(session.Query("TRUNCATE go.t").Exec(), "truncate")
	must(session.Query("SELECT count(*) FROM go.t").Scan(&n), "count after")
	out["truncated"] = n

	datamodel(session, out)

	enc, _ := json.Marshal(out)
	fmt.Println(string(enc))
}
