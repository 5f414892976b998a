"""An agent whose tool is an API operation: OpenAPI tools from the document a server serves.

The script starts a small customer API on 127.0.0.1 (the standard library's
``http.server``) that serves its OpenAPI document at ``/openapi.json``. ``openapi_tools``
makes one tool per operation; given to ``Agent(tools=...)``, each is a ToolNode named
``OpenAPI__<operationId>``, which specs_agent/openapi/chat.yaml lists in its ``tools:``.
An answer of 404 goes back to the model as an error tool message.

Needs the openapi and yaml extras: ``pip install 'nodestep[openapi,yaml]'``.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from nodestep import Agent, ScriptedModel, ScriptedReply
from nodestep.agents import openapi_tools

SPECS = Path(__file__).parent / "specs_agent" / "openapi"
CUSTOMERS = {"7": {"id": "7", "name": "Alice", "email": "alice@example.com"}}
DOCUMENT = {
    "openapi": "3.1.0",
    "info": {"title": "Bike shop customers", "version": "1.0.0"},
    "paths": {
        "/customers/{customer_id}": {
            "get": {
                "operationId": "get_customer",
                "summary": "Get a customer by their id",
                "parameters": [
                    {"name": "customer_id", "in": "path", "required": True,
                     "schema": {"type": "string"}},
                ],
            }
        }
    },
}  # fmt: skip


class CustomerApi(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/openapi.json":
            status, body = 200, DOCUMENT
        else:
            customer = CUSTOMERS.get(self.path.removeprefix("/customers/"))
            status, body = (200, customer) if customer else (404, {"detail": "no such customer"})
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:  # keep the example's output to the agent
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), CustomerApi)
threading.Thread(target=server.serve_forever, daemon=True).start()
base_url = f"http://127.0.0.1:{server.server_port}"

tools = openapi_tools(httpx.get(f"{base_url}/openapi.json").json(), base_url=base_url)
model = ScriptedModel(
    [
        ScriptedReply(
            tool_calls=[
                ("OpenAPI__get_customer", {"customer_id": "7"}),
                ("OpenAPI__get_customer", {"customer_id": "8"}),
            ]
        ),
        ScriptedReply("Customer 7 is Alice; there is no customer 8.", expect="no such customer"),
    ]
)
agent = Agent(SPECS, start_node="chat", llm=model, tools=tools)
out = agent.step_sync("Who are customers 7 and 8?")

print("tools:", [line for line in model.calls[0][0].content.splitlines() if " - " in line])
for message in model.calls[-1][1:]:
    calls = [f"{c.name}({c.args})" for c in getattr(message, "tool_calls", ())]
    print(f"{message.role}: {message.content or ', '.join(calls)}")
print(f"-> {out.output} ({out.status})")
server.shutdown()
server.server_close()
