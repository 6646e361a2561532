# Adding a column with a default and altering another: SQLite's schema editor
# rebuilds the table (foreign keys off, copy, drop, rename), the migration
# that must keep every book and its author.
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("notes", "0001_initial")]
    operations = [
        migrations.AddField(model_name="book", name="pages", field=models.IntegerField(default=0)),
        migrations.AlterField(model_name="book", name="title", field=models.CharField(max_length=300)),
    ]
