#!/bin/bash
# The entrypoint of the test cluster's Spark image, following the contract of
# Spark's own Kubernetes image (resource-managers/kubernetes/docker in
# apache/spark), which the pyspark package does not ship: Spark's driver pod
# runs `driver ARGS...`, executor pods run `executor` with SPARK_EXECUTOR_*,
# SPARK_DRIVER_URL and SPARK_JAVA_OPT_<n> in the environment; anything else
# runs as given.
set -euo pipefail

: "${SPARK_HOME:?}"
SPARK_CLASSPATH="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$SPARK_HOME/jars/*"
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-python3}
export PYSPARK_DRIVER_PYTHON=${PYSPARK_DRIVER_PYTHON:-python3}

# SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in index order.
java_opts=()
while IFS='=' read -r name _; do
  java_opts+=("${!name}")
done < <(env | grep -o '^SPARK_JAVA_OPT_[0-9]*=' | sort -t_ -k4 -n)

case "${1:-}" in
driver)
  shift
  exec /usr/bin/tini -s -- "$SPARK_HOME/bin/spark-submit" \
    --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?}" \
    --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
    --deploy-mode client "$@"
  ;;
executor)
  shift
  exec /usr/bin/tini -s -- java "${java_opts[@]}" \
    -Xms"${SPARK_EXECUTOR_MEMORY:?}" -Xmx"$SPARK_EXECUTOR_MEMORY" \
    -cp "$SPARK_CLASSPATH" \
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "${SPARK_DRIVER_URL:?}" \
    --executor-id "${SPARK_EXECUTOR_ID:?}" \
    --cores "${SPARK_EXECUTOR_CORES:?}" \
    --app-id "${SPARK_APPLICATION_ID:?}" \
    --hostname "${SPARK_EXECUTOR_POD_IP:?}" \
    --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
    --podName "${SPARK_EXECUTOR_POD_NAME:-}"
  ;;
*)
  exec /usr/bin/tini -s -- "$@"
  ;;
esac
