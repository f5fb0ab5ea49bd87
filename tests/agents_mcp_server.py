"An MCP server over stdio holding only the agent tools, for tests/test_agents.py: python agents_mcp_server.py ROOT"
import sys
from headlesnb.agents import AgentManager
from headlesnb.agents_ui import register_agent_tools
from headlesnb.mcp import HeadlesnbMCPServer

if __name__ == '__main__':
    srv = HeadlesnbMCPServer('headlesnb-agents')
    register_agent_tools(srv, AgentManager(sys.argv[1], tmux=False), None)
    srv.run('stdio')
