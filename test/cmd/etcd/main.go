// Command etcd is the etcd server at the version k8s.io/kubernetes requires,
// built from go.etcd.io/etcd/server/v3 so the integration tests need no
// release download.
//
// test/hack/ensure-bins.sh builds it into the repository's bin/ directory.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
