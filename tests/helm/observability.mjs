// Checks the chart's observability objects with third-party schemas and grammar (run under Node 22 from
// .peers/node; the test passes the node_modules path in NODE_PATH-free form, as argv[2]):
//   ServiceMonitor and PrometheusRule against the Prometheus Operator CRD schemas
//   (@kubernetes-models/prometheus-operator validates with the CRDs' openAPIV3Schema), and every PromQL
//   expression with Prometheus' own grammar (@prometheus-io/lezer-promql): syntax errors and metric names.
// stdin: {"objects": [k8s objects], "exprs": [PromQL]}; stdout: {"objects": [{kind, name, error}],
// "exprs": [{expr, errors, metrics}]}.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";

const modules = process.argv[2];
const load = (spec) => import(pathToFileURL(path.join(modules, spec)).href);
const { ServiceMonitor } = await load("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor.js");
const { PrometheusRule } = await load("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule.js");
const { parser } = await load("@prometheus-io/lezer-promql/dist/index.es.js");
const models = { ServiceMonitor, PrometheusRule };

const input = JSON.parse(readFileSync(0, "utf8"));
const objects = input.objects.map((obj) => {
  const Model = models[obj.kind];
  if (!Model) return { kind: obj.kind, name: obj.metadata?.name, error: "no schema for this kind" };
  try {
    new Model(obj).validate();
    return { kind: obj.kind, name: obj.metadata.name, error: null };
  } catch (err) {
    return { kind: obj.kind, name: obj.metadata?.name, error: String(err.message ?? err) };
  }
});
const exprs = input.exprs.map((expr) => {
  const tree = parser.parse(expr);
  let errors = 0;
  const metrics = new Set();
  tree.iterate({
    enter: (node) => {
      if (node.type.isError) errors += 1;
      if (node.name === "Identifier" && node.node.parent?.name === "VectorSelector") {
        metrics.add(expr.slice(node.from, node.to));
      }
    },
  });
  return { expr, errors, metrics: [...metrics].sort() };
});
process.stdout.write(JSON.stringify({ objects, exprs }));
