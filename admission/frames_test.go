package admission

import "testing"

func TestIsPlumbingFile(t *testing.T) {
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/tmp/sparkdap-submit-3938816457/remote_debug.py", true},
		{"/data/yarn/appcache/application_1/container_1/remote_debug.py", true},
		{"C:\\spark\\work\\remote_debug.py", true},
		{"/opt/spark/python/lib/pyspark.zip/pyspark/daemon.py", true},
		{"/usr/lib/python3.11/site-packages/pyspark/daemon.py", true},
		{"/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", false},
		{"/home/me/job/daemon.py", false},
		{"/home/me/job/my_remote_debug.py", false},
		{"/home/me/job/remote_debug.pyc", false},
		{"", false},
	} {
		if got := IsPlumbingFile(tc.path); got != tc.want {
			t.Errorf("IsPlumbingFile(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}
