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

	enc, _ := json.Marshal(out)
	fmt.Println(string(enc))
}
