"""The ``agent_loop`` kind's loop (core/kinds/agent.py), apart from transport as runtime/load/ is:
the controller (``loop``: episodes x fault profiles x scenarios x placements, tool calls with
retries and back-off), the tools and their fault injector (``tools``), and the same tools as an
HTTP service (``tool_server``). A backend supplies one model turn (``loop.Endpoint``); this
package never imports a backend."""
