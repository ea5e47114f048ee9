"""A Flask service instrumented with OpenTelemetry (opentelemetry-instrumentation-flask), its
answers naming its own server span in a traceresponse header (the SDK's response propagator),
for bench/traceresponse_gunicorn.py: GET /order/N sleeps 2 ms and answers a small JSON.
Run under gunicorn: gunicorn -w 3 -b 127.0.0.1:PORT --chdir bench/third_party flask_orders:app"""
import time

from flask import Flask
from opentelemetry import trace
from opentelemetry.instrumentation.flask import FlaskInstrumentor
from opentelemetry.instrumentation.propagators import (TraceResponsePropagator,
                                                       set_global_response_propagator)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

trace.set_tracer_provider(TracerProvider(resource=Resource.create(
    {"service.name": "orders-flask"})))
set_global_response_propagator(TraceResponsePropagator())
app = Flask(__name__)
FlaskInstrumentor().instrument_app(app)


@app.route("/order/<int:n>")
def order(n: int):
    time.sleep(0.002)
    return {"order": n, "total": sum(range(n % 1000))}
