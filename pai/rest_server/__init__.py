"""The master's REST API (aiohttp): OpenPAI's paths and shapes, plus internal agent endpoints."""
