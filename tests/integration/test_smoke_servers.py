import psycopg
import redis


def test_servers_answer(database_url: str, redis_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        assert conn.execute("select count(*) from jobs").fetchone() == (0,)
    assert redis.Redis.from_url(redis_url).ping()
